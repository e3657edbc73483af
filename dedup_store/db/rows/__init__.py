"""The rows the store writes, computed before its statements run: a batch's new documents and
the rows of the key tables. Below the lookups, the scoring and the writers, which all use them,
and importing none of them."""
