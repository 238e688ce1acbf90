"""Tests of the forge side: each forge's client, webhooks and payloads, the shared contract,
the registry, the webhook receiver and dispatch to CI."""
