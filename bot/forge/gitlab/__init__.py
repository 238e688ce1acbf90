"""GitLab, inbound and outbound.

plugin.py       the ForgePlugin the registry lists (bot/forge/registry.py)
webhook.py      a delivery's secret token and headers
events.py       webhook payloads, dispatched pipelines' plan files -> inbound.py's types
environment.py  token and URL variables; what a GitLab CI job knows of its event
client.py       GitLabForge: the Forge protocol on python-gitlab
"""
