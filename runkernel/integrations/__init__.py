"""Adapters to agent frameworks, each behind an optional extra; the core never imports them."""
