"""``shardex serve``: a local page of the live heat per logical key and shard key.

- ``feeds``: ``MeterFeed`` (a running index's heat meter), ``PrometheusFeed`` (one
  process's ``/metrics`` endpoint);
- ``fleet``: ``FleetFeed``, a Prometheus server: every process it scrapes, summed by
  PromQL, with history from range queries (``promql``: the HTTP API client);
- ``routing``: ``RoutingWatch``, the routing record and migration of an index in a store;
- ``server``: ``HeatServer``, the standard library's HTTP server on 127.0.0.1 serving
  the page and its JSON endpoint, ``/api/heat`` (``shardex.serve/1``), read-only, to
  requests whose ``Host`` names 127.0.0.1 or localhost.

``open_feed(url)`` picks the feed a URL needs: ``FleetFeed`` for a Prometheus server,
``PrometheusFeed`` for a ``/metrics`` endpoint.

From Python, beside a running index::

    server = HeatServer(MeterFeed(index.meter))   # index built with meter=True
    print(server.url)
"""

from __future__ import annotations

from shardex.web.feeds import Feed, MeterFeed, PrometheusFeed
from shardex.web.fleet import FleetFeed, open_feed
from shardex.web.routing import RoutingWatch
from shardex.web.server import HeatServer

__all__ = ["Feed", "FleetFeed", "HeatServer", "MeterFeed", "PrometheusFeed", "RoutingWatch",
           "open_feed"]
