"""Reports built from ``results.json``: terminal table, Markdown and static HTML."""
