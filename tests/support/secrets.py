"""A corpus of secrets, one of each token format Zero masks (all fake), and harmless text that must survive."""

from __future__ import annotations

TOKENS: dict[str, str] = {
    "openai": "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z",
    "anthropic": "sk-ant-api03-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z0123",
    "stripe": "sk_live_51Hb3dEf6hIj9kLm2nOp5qRs",
    "stripe test": "rk_test_51Hb3dEf6hIj9kLm2nOp5qRs",
    "github": "ghp_Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z0123",
    "github app": "ghs_Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z0123",
    "github fine-grained": "github_pat_11AB3DEF60abcdefghijklmnop_qrstuvwxyz0123456789",
    "gitlab": "glpat-Ab3dEf6hIj9kLm2nOp5q",
    "gitlab service account": "glsoat-Ab3dEf6hIj9kLm2nOp5q",
    "aws access key id": "AKIAIOSFODNN7EXAMPLE",
    "aws secret access key": "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "aws secret access key after its key id": "AKIAI44QH8DHBEXAMPLE,je7MtGbClwBF/2Zp9Utk/h3yCo8nvbEXAMPLEKEY",
    "slack": "xoxb-123456789012-123456789012-Ab3dEf6hIj9kLm2nOp5qRs",
    "slack webhook": "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
    "google api key": "AIzaSyA-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4",
    "google oauth": "ya29.a0Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z",
    "npm": "npm_Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z0123",
    "hugging face": "hf_Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb",
    "pypi": "pypi-AgEIcHlwaS5vcmcCJGFiY2RlZmdoLWlqa2wtbW5vcC1xcnN0LXV2d3h5ejAxMjM0",
    "sendgrid": "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",
    "mailgun": "key-0123456789abcdef0123456789abcdef",
    "digitalocean": "dop_v1_" + "0123456789abcdef" * 4,
    "shopify": "shpat_0123456789abcdef0123456789abcdef",
    "databricks": "dapi0123456789abcdef0123456789abcdef",
    "docker hub": "dckr_pat_Ab3dEf6hIj9kLm2nOp5qRs8tUv1",
    "linear": "lin_api_Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb3dEf6h",
    "telegram bot": "123456789:AAAb3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zA",
    "discord webhook": "https://discord.com/api/webhooks/123456789012345678/Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z",
    "azure storage": "AccountKey=Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z==",
    "age": "AGE-SECRET-KEY-1QQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQ",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "private key": (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM2m\n-----END RSA PRIVATE KEY-----"
    ),
    "bearer": "Authorization: Bearer Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z",
    "http basic header": "Authorization: Basic dXNlcjpodW50ZXIyMDI0cGFzcw==",
    "basic credentials": "curl -H 'X-Auth: Basic ZGVwbG95OnMzY3IzdC1wYXNz'",
    "credentials in a url": "https://deploy:hunter2-2024-pass@git.example.com/repo.git",
    "assigned secret": 'password = "c0rrect-horse-battery-9"',
}

# The part of each sample that must never be seen (for context formats, the value, not the key name).
SECRETS: dict[str, str] = {
    **TOKENS,
    "aws secret access key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "aws secret access key after its key id": "je7MtGbClwBF/2Zp9Utk/h3yCo8nvbEXAMPLEKEY",
    "basic credentials": "ZGVwbG95OnMzY3IzdC1wYXNz",
    "bearer": "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z",
    "http basic header": "dXNlcjpodW50ZXIyMDI0cGFzcw==",
    "credentials in a url": "hunter2-2024-pass",
    "assigned secret": "c0rrect-horse-battery-9",
    "azure storage": "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z==",
    "private key": "MIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM2m",
    "slack webhook": "XXXXXXXXXXXXXXXXXXXXXXXX",
    "discord webhook": "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z",
}

# Environment secrets, with quotes and backslashes that a JSON encoder would escape.
ENV_SECRETS = {
    "MY_SERVICE_TOKEN": 'pa"ss\\word-4242',
    "DB_PASSWORD": "c:\\db\\s3cret\\path",
    "SORT_KEY": "sequence",  # harmless in itself; never a key or the structure of a record
}

# Harmless text that must come through untouched.
HARMLESS = [
    "commit 3f9a1c2b7d4e5f60718293a4b5c6d7e8f9012345 fixed it",
    "id 123e4567-e89b-12d3-a456-426614174000",
    "a basic configuration and a basic understanding",
    "def login(password: str, token: str = get_token()) -> None:",
    "see https://docs.example.com/path?x=1 and mailto:someone@example.com",
    "the sk- prefix, ghp_ alone, and the word Bearer alone are fine",
    "HOME=/root LANG=C.UTF-8 EDITOR=vim",
    "api_key = os.environ['OPENAI_API_KEY']",
    "Basic Configuration of the build, Basic usage",
    "AKIA is how AWS key ids start; 3f9a1c2b7d4e5f60718293a4b5c6d7e8f9012345 is a commit",
]
