"""Build-time artifacts of the site (figures, explorer data, notebook pages, snippet output).

See :mod:`qkv_site.artifacts.plugin` for the plugin and how to add a kind of artifact.
"""
