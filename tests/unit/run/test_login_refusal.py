"""The preflight's reading of a tracking server's answer to one API call (farm/run/preflight.py,
`login_refusal`): only a 2xx is "reachable and authorised"; every other answer is one line that
names where the credential came from (a variable or ~/.mlflow/credentials), never its value.

The answers and logins here are the structured values `farm.store.auth` reads off a real server
and MLflow's own credential reading; tests/e2e/test_server_credentials.py meets each kind of
answer from a real server (401, 5xx, a timeout, a token), and the `Login`s from real variables and
files below (`client_login`)."""

from __future__ import annotations

import pytest

from farm.errors import UserError
from farm.run.preflight import login_refusal
from farm.store.auth import ApiAnswer, CredentialsFileError, Login, client_login

VARS = Login(user="ann", user_from="MLFLOW_TRACKING_USERNAME", password_from="MLFLOW_TRACKING_PASSWORD", token_from=None)
FILE = Login(user="ann", user_from="~/.mlflow/credentials", password_from="~/.mlflow/credentials", token_from=None)
TOKEN = Login(user=None, user_from=None, password_from=None, token_from="MLFLOW_TRACKING_TOKEN")
NONE = Login(user=None, user_from=None, password_from=None, token_from=None)
NO_PASSWORD = Login(user="ann", user_from="MLFLOW_TRACKING_USERNAME", password_from=None, token_from=None)
NO_USER = Login(user=None, user_from=None, password_from="~/.mlflow/credentials", token_from=None)
COLON = Login(user="a:b", user_from="MLFLOW_TRACKING_USERNAME", password_from="MLFLOW_TRACKING_PASSWORD", token_from=None)

BY_VARS = "the login of user 'ann' (from MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD)"


@pytest.mark.parametrize("status", [200, 204])
@pytest.mark.parametrize("login", [VARS, FILE, TOKEN, NONE, NO_PASSWORD])
def test_a_2xx_is_reachable_and_authorised(status, login):
    assert login_refusal(ApiAnswer(status), login) is None


@pytest.mark.parametrize("answer, login, words", [
    (ApiAnswer(401, "basic"), NONE, "requires a login: set MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD "
                                    "(or ~/.mlflow/credentials)"),
    (ApiAnswer(401, "basic"), VARS, f"rejected {BY_VARS}: wrong user or password"),
    (ApiAnswer(401, "basic"), FILE, "rejected the login of user 'ann' (from ~/.mlflow/credentials): wrong user or "
                                    "password"),
    (ApiAnswer(401, "basic"), COLON, "rejected the login of user 'a:b' (from MLFLOW_TRACKING_USERNAME and "
                                     "MLFLOW_TRACKING_PASSWORD): a ':' in a user name cannot pass HTTP basic auth"),
    (ApiAnswer(401, "basic"), NO_PASSWORD, "requires a login: MLFLOW_TRACKING_USERNAME names user 'ann' but no "
                                           "password is set: set MLFLOW_TRACKING_PASSWORD (or ~/.mlflow/credentials)"),
    (ApiAnswer(401, "basic"), NO_USER, "requires a login: a password is set in ~/.mlflow/credentials but no user: "
                                       "set MLFLOW_TRACKING_USERNAME (or ~/.mlflow/credentials)"),
    (ApiAnswer(401, "basic"), TOKEN, "takes a user and password (HTTP basic auth, as MLflow's auth app does), not "
                                     "the token in MLFLOW_TRACKING_TOKEN: set MLFLOW_TRACKING_USERNAME and "
                                     "MLFLOW_TRACKING_PASSWORD"),
    (ApiAnswer(401, "bearer"), TOKEN, "rejected the token in MLFLOW_TRACKING_TOKEN (HTTP 401)"),
    (ApiAnswer(403), VARS, "refused user 'ann' (from MLFLOW_TRACKING_USERNAME) (HTTP 403): it may not read "
                           "experiments; an admin of the server grants permissions"),
    (ApiAnswer(403), TOKEN, "refused the token in MLFLOW_TRACKING_TOKEN (HTTP 403): it may not read experiments; "
                            "an admin of the server grants permissions"),
    (ApiAnswer(500), VARS, f"answered HTTP 500 to an API call with {BY_VARS}; see the server's log"),
    (ApiAnswer(502), NONE, "answered HTTP 502 to an API call with no login; see the server's log"),
    (ApiAnswer(404), VARS, f"answered HTTP 404 to an API call (/api/2.0/mlflow/experiments/search) with {BY_VARS}: "
                           "is it an MLflow tracking server?"),
    (ApiAnswer(302), NONE, "answered HTTP 302 to an API call (/api/2.0/mlflow/experiments/search) with no login: "
                           "is it an MLflow tracking server?"),
    (ApiAnswer(None, failure="timeout"), FILE, "did not answer an API call within 30 s, sent with the login of user "
                                               "'ann' (from ~/.mlflow/credentials): it answers /health, so it is up "
                                               "but busy or stuck; see its log"),
    (ApiAnswer(None, failure="ConnectionResetError"), TOKEN, "answered /health but not an API call sent with the "
                                                             "token in MLFLOW_TRACKING_TOKEN (ConnectionResetError)"),
])
def test_every_other_answer_is_one_line_naming_the_credentials_source(answer, login, words):
    assert login_refusal(answer, login) == words


def test_a_timeout_names_mlflows_own_wait_when_it_is_the_shorter():
    said = login_refusal(ApiAnswer(None, failure="timeout"), VARS, timeout_s=4)
    assert said.startswith("did not answer an API call within 4 s (MLFLOW_HTTP_REQUEST_TIMEOUT), sent with")


@pytest.fixture
def home(tmp_path, monkeypatch):
    for name in ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD", "MLFLOW_TRACKING_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".mlflow").mkdir()
    return tmp_path / ".mlflow" / "credentials"


def test_where_each_part_of_the_login_comes_from(home, monkeypatch):
    home.write_text("[mlflow]\nmlflow_tracking_username = bob\nmlflow_tracking_password = p%%w\n")
    assert client_login() == Login("bob", "~/.mlflow/credentials", "~/.mlflow/credentials", None)
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "other")
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", "t")
    assert client_login() == Login("bob", "~/.mlflow/credentials", "MLFLOW_TRACKING_PASSWORD", "MLFLOW_TRACKING_TOKEN")
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "")  # empty: MLflow takes the file's
    assert client_login().user_from == "~/.mlflow/credentials"


@pytest.mark.parametrize("text, why, option, line", [
    ("[mlflow]\nmlflow_tracking_password = 100%-secret\n", "interpolation", "mlflow_tracking_password", None),
    ("[mlflow]\nmlflow_tracking_username = %(nobody)s\n", "interpolation", "mlflow_tracking_username", None),
    ("mlflow_tracking_password = secret-one\n", "syntax", None, 1),
    ("[mlflow]\nmlflow_tracking_password = a\nmlflow_tracking_password = b\n", "duplicate",
     "mlflow_tracking_password", 3),
])
def test_a_credentials_file_mlflow_cannot_read_is_named_without_its_text(home, text, why, option, line):
    home.write_text(text)
    with pytest.raises(CredentialsFileError) as caught:
        client_login()
    assert (caught.value.why, caught.value.option, caught.value.line) == (why, option, line)
    assert "secret" not in str(caught.value) and caught.value.__cause__ is None


def test_the_preflight_names_the_file_and_key(home):
    from farm.run.preflight import _check_server_login

    home.write_bytes(b"[mlflow]\nmlflow_tracking_password = caf\xe9\n")
    with pytest.raises(UserError) as caught:
        _check_server_login("http://127.0.0.1:9", "--tracking-uri")  # refused before any request
    assert caught.value.line() == "~/.mlflow/credentials: MLflow cannot read this file: it is not UTF-8"
