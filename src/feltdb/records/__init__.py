"""The authority's records: plain structs (:mod:`feltdb.records.workload`), their base and
validation at the edge (:mod:`feltdb.records.base`), and their one codec for stored text
(:mod:`feltdb.records.codec`).

Nothing is imported here, so that ``feltdb.auth`` may build its records on the base
without importing the workload records (which hold the auth types).
"""
