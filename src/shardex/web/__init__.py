"""``shardex serve``: a local page of the live heat per logical key and shard key.

- ``feeds``: ``MeterFeed`` (a running index's heat meter), ``PrometheusFeed`` (a shardex
  ``/metrics`` endpoint), ``RoutingWatch`` (the routing record of a store);
- ``server``: ``HeatServer``, the standard library's HTTP server on 127.0.0.1 serving
  the page and its JSON endpoint, ``/api/heat`` (``shardex.serve/1``).

From Python, beside a running index::

    server = HeatServer(MeterFeed(index.meter))   # index built with meter=True
    print(server.url)
"""

from __future__ import annotations

from shardex.web.feeds import Feed, MeterFeed, PrometheusFeed, RoutingWatch
from shardex.web.server import HeatServer

__all__ = ["Feed", "HeatServer", "MeterFeed", "PrometheusFeed", "RoutingWatch"]
