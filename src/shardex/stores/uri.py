"""Store URIs, parsed once: ``scheme://[user[:password]@]location[/path]?option=value``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import SplitResult, parse_qsl, unquote, urlsplit

from shardex.errors import InvalidInput, InvalidURI

__all__ = ["AIOHTTP_CONNECTIONS", "CONNECTIONS", "DYNAMODB_CONNECTIONS", "StoreURI", "TIMEOUTS",
           "check_client", "check_connections", "check_keywords", "check_settings", "endpoint_of",
           "given_endpoint", "is_timeout", "split_url"]


# a store's connect and read timeouts: above 0, and finite (an hour at most)
TIMEOUTS = "a number of seconds above 0 and at most 3600"


def is_timeout(seconds: Any) -> bool:
    """Whether ``seconds`` is a connect or read timeout a store takes (``TIMEOUTS``)."""
    return not isinstance(seconds, bool) and isinstance(seconds, int | float) \
        and 0 < seconds <= 3600


# a store client's connection pool: the requests it carries at once, up to the widest
# fan-out a routing can ask for (shardex.routing.MAX_SHARDS keys)
CONNECTIONS = "a whole number from 1 to 4096"
# the pools of the clients shardex builds, by default: DynamoDB's (botocore's own is 10),
# and the Azure SDKs' aiohttp session (aiohttp's own)
DYNAMODB_CONNECTIONS = 64
AIOHTTP_CONNECTIONS = 100


def check_client(where: str, *, connect_timeout: float, read_timeout: float,
                 max_connections: int) -> None:
    """Raise InvalidInput, its message starting with ``where``, for a client setting a
    store does not take: a timeout that is not ``TIMEOUTS``, a pool not ``CONNECTIONS``."""
    for name, seconds in (("connect_timeout", connect_timeout),
                          ("read_timeout", read_timeout)):
        if not is_timeout(seconds):
            raise InvalidInput(f"{where}{name} must be {TIMEOUTS}, got {seconds!r}")
    check_connections(where, max_connections)


def check_settings(options: Mapping[str, Any], *, connections: int, endpoint: str,
                   what: str, where: str = "") -> None:
    """The values of a store URI's client options (``StoreURI.take``'s), as opening the
    store checks them but without building a client (``plan --store``): the timeouts and
    the pool (``check_client``, ``connections`` the pool's default) and the service's URL
    in option ``endpoint`` (InvalidURI naming ``what`` for one that is not http(s))."""
    try:
        check_client(where, connect_timeout=options.get("connect_timeout", 5.0),
                     read_timeout=options.get("read_timeout", 30.0),
                     max_connections=options.get("max_connections", connections))
    except InvalidInput as exc:  # the URI's option: the URI's fault
        raise InvalidURI(str(exc)) from None
    if options.get(endpoint) is not None:
        split_url(options[endpoint], what, web=True)


def check_keywords(scheme: str, options: Mapping[str, Any], known: set[str]) -> None:
    """Refuse keyword options (``open_store``'s, over the URI's) that a store of
    ``scheme`` does not take: InvalidInput naming them and the ``known`` ones."""
    unknown = sorted(set(options) - known)
    if unknown:
        raise InvalidInput(f"{scheme}:// does not know the option(s) {', '.join(unknown)}; "
                           f"known: {', '.join(sorted(known))}")


def check_connections(where: str, count: Any) -> int:
    """``count``, a client's connection pool; InvalidInput, its message starting with
    ``where``, unless it is ``CONNECTIONS``."""
    if type(count) is not int or not 1 <= count <= 4096:
        raise InvalidInput(f"{where}max_connections must be {CONNECTIONS}, got {count!r}")
    return count


def split_url(url: str, what: str, *, port: bool = True, web: bool = False) -> SplitResult:
    """``urlsplit(url)``; a URL urllib cannot read (an unclosed IPv6 bracket, with ``port``
    a port that is not a number from 0 to 65535) raises InvalidURI naming ``what``, not
    ValueError; with ``web`` so does one that is not ``http(s)://HOST...`` (a service's
    endpoint, which the drivers would otherwise refuse only at the first request)."""
    try:
        parts = urlsplit(url)
        if port:
            parts.port  # noqa: B018 - read for the ValueError it raises
    except ValueError as exc:
        raise InvalidURI(f"{what} {url!r} cannot be parsed: {exc}") from None
    if web and (parts.scheme.lower() not in ("http", "https") or not parts.hostname):
        raise InvalidURI(f"{what} {url!r} is not an http:// or https:// URL with a host")
    if web and (parts.username is not None or parts.password is not None):
        # the drivers refused them with their own ValueError at the first request
        raise InvalidURI(f"{what} {parts.scheme}://...@{parts.hostname}... holds "
                         "credentials: credentials never go in a URL; give the service's "
                         "key or connection string by its environment variable")
    return parts


def given_endpoint(endpoint: str | None, what: str) -> None:
    """InvalidInput if ``endpoint`` was given but is empty (an unset shell variable,
    ``--endpoint "$EP"``): taken as not given, the environment's account was used."""
    if endpoint is not None and not endpoint.strip():
        raise InvalidInput(f"{what} is empty: give its URL, or leave it out to take the one "
                           "the environment names")


def endpoint_of(url: str) -> str:
    """A service endpoint as one text for any spelling of it: its scheme and host in lower
    case, the scheme's default port left out, no trailing '/' (``Store.holds``)."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return url
    default = {"http": 80, "https": 443}.get(parts.scheme.lower())
    host = (parts.hostname or "") + ("" if port in (None, default) else f":{port}")
    return f"{parts.scheme.lower()}://{host}{parts.path.rstrip('/')}"


@dataclass(frozen=True, slots=True)
class StoreURI:
    """A parsed store URI: ``scheme://[user[:password]@]location[/path]?option=value``."""

    scheme: str
    location: str = ""
    path: str = ""
    options: Mapping[str, str] = field(default_factory=dict)
    username: str | None = None
    password: str | None = None
    raw: str = ""

    @classmethod
    def parse(cls, uri: str) -> StoreURI:
        """Parse ``uri``; raise InvalidURI for a missing scheme, a repeated or unnamed option,
        or a fragment."""
        if not isinstance(uri, str) or "://" not in uri:
            raise InvalidURI(f"store URI must look like scheme://..., got {uri!r}")
        parts = split_url(uri, "store URI", port=False)
        if parts.fragment or uri.endswith("#"):
            # urllib drops it silently: a '#' in a name or a password would cut it short
            raise InvalidURI(f"store URI {uri!r} has a '#' fragment, which no store reads "
                             "(write a '#' in a name or password as %23)")
        options: dict[str, str] = {}
        for name, value in parse_qsl(parts.query, keep_blank_values=True, strict_parsing=False):
            if not name:
                raise InvalidURI(f"store URI {uri!r} has an option with no name "
                                 f"(={value!r}); options are name=value")
            if name in options:
                raise InvalidURI(f"store URI {uri!r} repeats the option {name!r}")
            options[name] = value
        try:
            username, password = parts.username, parts.password
        except ValueError as exc:
            raise InvalidURI(f"store URI {uri!r}: {exc}") from exc
        return cls(
            scheme=parts.scheme.lower(),
            location=unquote(parts.netloc.rpartition("@")[2]),
            path=unquote(parts.path.lstrip("/")),
            options=options,
            username=unquote(username) if username else None,
            password=unquote(password) if password else None,
            raw=uri,
        )

    def take(self, allowed: Mapping[str, type]) -> dict[str, Any]:
        """Convert the options named in ``allowed`` to their types; refuse any other option."""
        unknown = sorted(set(self.options) - set(allowed))
        if unknown:
            raise InvalidURI(
                f"{self.scheme}:// does not know the option(s) {', '.join(unknown)}; "
                f"known: {', '.join(sorted(allowed))}"
            )
        out: dict[str, Any] = {}
        for name, text in self.options.items():
            kind = allowed[name]
            try:
                if kind is bool:
                    if text.lower() not in ("1", "0", "true", "false", "yes", "no"):
                        raise ValueError(text)
                    out[name] = text.lower() in ("1", "true", "yes")
                else:
                    out[name] = kind(text)
            except ValueError as exc:
                raise InvalidURI(
                    f"{self.scheme}:// option {name}={text!r} is not a valid {kind.__name__}"
                ) from exc
        return out
