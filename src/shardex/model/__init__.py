"""The values every layer shares: what a store holds, and what it can hold.

``entries``: entries, placements, positions, pages, records and write tokens, as plain
frozen values; ``values``: the attribute values a store holds (DynamoDB's rules, and
what a store adds). No I/O and nothing of sharding: the store contract
(``shardex.stores.base``) moves these values, the write machine and the migrations
decide on them, and none of them depends on the stores.
"""
