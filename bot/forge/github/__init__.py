"""GitHub, inbound and outbound.

plugin.py       the ForgePlugin the registry lists (bot/forge/registry.py)
webhook.py      a delivery's HMAC-SHA256 signature and headers
events.py       webhook payloads and Actions event files -> inbound.py's types
environment.py  token and URL variables; the Actions job's event name and file
client.py       GitHubForge: the Forge protocol on PyGithub
"""
