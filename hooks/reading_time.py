"""Each chapter's reading time under its title, and the path's times on the home page,
counted from each chapter's rendered HTML (its prose, its code and printed output, its
folded blocks at half): ``qkv_site.reading``, which the tests use too."""

from qkv_site.reading import ReadingTimes

_times = ReadingTimes()  # one site per process; kept across the rebuilds of `mkdocs serve`
on_page_markdown = _times.on_page_markdown
on_page_content = _times.on_page_content
on_env = _times.on_env
on_post_page = _times.on_post_page
