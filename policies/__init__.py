"""opbot's policies: default.yaml and its JSON Schema (read by bot.policy)."""
