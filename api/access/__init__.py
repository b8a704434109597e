"""Who is calling and what they may touch: tokens, roles, teams, ownership, the audit log.

docs/teams.md is the operator's and the user's guide; docs/security.md the rules.
"""
