"""A report's sections as data, each produced once (docs/analytics.md, "Report sections").

``model``: :class:`~analytics.sections.model.Section` and its columns; ``registry``: the
ordered list every renderer loops over (:func:`~analytics.sections.registry.build_sections`);
the other modules each produce one family of sections. Adding a section:
CONTRIBUTING.md, "Adding a report section".
"""
