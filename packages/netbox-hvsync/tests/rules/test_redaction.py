"""SPEC 7.3 redaction: "backend error details are redacted before being logged or stored. Values under
credential-like keys become [redacted] (keys are normalised for case, hyphen, underscore and space). In a
422 body, input and input_value are redacted when the sibling loc names a credential field.
Credential-looking text in message strings and in transport-error text is swept. Nesting beyond the
recursion limit yields [redacted: nesting depth limit]." """

import json

import pytest
from netbox_hvsync.rules.redaction import (
    DEPTH_REDACTED,
    REDACTED,
    is_credential_key,
    normalise_key,
    redact,
    redacted_detail,
    sweep_text,
)

SECRET = "s3cr3t-planted-value-9f8e7d6c5b4a"


@pytest.mark.parametrize(
    "key",
    [
        "password",
        "Password",
        "PASS WORD",
        "pass-word",
        "pass_word",
        "X-Service-API-Key",
        "x_service_api_key",
        "api key",
        "API-KEY",
        "token",
        "Token_Value",
        "token key",
        "raw_key",
        "Authorization",
        "db_password",
        "client-secret",
        "csrf_prevention_token",
        "PVEAuthCookie",
    ],
)
def test_credential_like_keys_are_normalised(key: str) -> None:
    """Keys are normalised for case, hyphen, underscore and space."""
    assert is_credential_key(key)
    assert redact({key: SECRET}) == {key: REDACTED}


@pytest.mark.parametrize(
    "key", ["name", "token_version", "token_name", "port", "detail", "loc", "keys", "username"]
)
def test_ordinary_keys_are_kept(key: str) -> None:
    assert not is_credential_key(key)
    assert redact({key: "visible"}) == {key: "visible"}


def test_normalise_key() -> None:
    assert normalise_key("X-Service_API Key") == "xserviceapikey"


def test_422_input_redacted_only_when_loc_names_a_credential() -> None:
    """In a 422 body, input and input_value are redacted when the sibling loc names a credential field."""
    body = {
        "detail": [
            {
                "loc": ["body", "token_value"],
                "msg": "String too long",
                "type": "string_too_long",
                "input": SECRET,
            },
            {"loc": ["body", "Password"], "msg": "bad", "type": "x", "input_value": SECRET},
            {
                "loc": ["body", "port"],
                "msg": "Input should be a valid integer",
                "type": "int_parsing",
                "input": "eighty",
            },
        ]
    }
    out = redact(body)
    assert out["detail"][0]["input"] == REDACTED
    assert out["detail"][1]["input_value"] == REDACTED
    assert out["detail"][2]["input"] == "eighty"
    assert out["detail"][0]["loc"] == ["body", "token_value"]
    assert SECRET not in json.dumps(out)


@pytest.mark.parametrize(
    "text",
    [
        f"header X-Service-API-Key: {SECRET} rejected",
        f"Authorization: Bearer nbt_abc123.{SECRET}",
        f"Authorization: Token {SECRET}",
        f"GET https://admin:{SECRET}@netbox.example/api/ failed",
        f"PVEAPIToken=root@pam!hvsync={SECRET}",
        f"url /api?token={SECRET}&x=1",
        f'body was {{"password": "{SECRET}"}}',
        f"password={SECRET}",
        f"api_key: {SECRET}",
        f"Bearer {SECRET}",
    ],
)
def test_credential_looking_text_is_swept(text: str) -> None:
    """Credential-looking text in message strings and in transport-error text is swept."""
    swept = sweep_text(text)
    assert SECRET not in swept, swept
    assert REDACTED in swept


def test_plain_messages_survive_the_sweep() -> None:
    for text in [
        "Invalid API key",
        "token_version must be 1 or 2",
        "Connection refused by 10.0.0.9:8800",
        "Too many failed authentication attempts",
        "Input should be a valid integer",
    ]:
        assert sweep_text(text) == text


def test_known_secrets_are_removed_exactly_anywhere() -> None:
    assert sweep_text(f"weird echo {SECRET}!", [SECRET]) == f"weird echo {REDACTED}!"


def test_nesting_beyond_the_limit() -> None:
    """Nesting beyond the recursion limit yields [redacted: nesting depth limit]."""
    deep: dict = {"password": SECRET}
    for _ in range(100):
        deep = {"a": deep}
    out = redact(deep, depth_limit=10)
    text = json.dumps(out)
    assert DEPTH_REDACTED in text and SECRET not in text
    node = out
    for _ in range(10):
        node = node["a"]
    assert node == {"a": DEPTH_REDACTED}
    shallow = redact({"a": {"b": "ok"}}, depth_limit=10)
    assert shallow == {"a": {"b": "ok"}}


def test_lists_strings_and_scalars() -> None:
    out = redact([{"token": SECRET}, f"password={SECRET}", 5, None, True])
    assert out == [{"token": REDACTED}, f"password={REDACTED}", 5, None, True]


def test_redacted_detail_renders_one_line() -> None:
    body = {
        "detail": [{"loc": ["body", "token"], "msg": "Field required", "type": "missing", "input": SECRET}]
    }
    assert redacted_detail(body) == "body.token: Field required"
    assert redacted_detail({"detail": f"bad\nkey {SECRET}"}, known_secrets=[SECRET]) == f"bad key {REDACTED}"
    assert redacted_detail(None, f"<html>password={SECRET}</html>") == f"<html>password={REDACTED}</html>"


def test_sweeping_is_idempotent() -> None:
    """Details are often redacted once by the stream consumer and again when stored."""
    for text in [
        f"token={SECRET}",
        f"Authorization: Token {SECRET}",
        f"PVEAPIToken=a@b!c={SECRET}",
        f'{{"password": "{SECRET}"}}',
        f"https://u:{SECRET}@h/",
    ]:
        once = sweep_text(text)
        assert sweep_text(once) == once
