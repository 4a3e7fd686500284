"""The cross-site consistency audit (`gslbd audit`, `audit:` in the config; docs/operations.md).

plan.py chooses what to ask (pure), compare.py says which answers differ (pure), ask.py asks the sites'
nameservers over DNS (dns.asyncquery)."""
