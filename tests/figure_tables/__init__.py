"""The expected tables of the figures' folded data blocks, one module per figure, named
after it (``score-spread`` in ``score_spread.py``): ``expected(d)`` rebuilds each table's
body rows (row label first) from the figure's ``data()``, ``d``, never from its
``tables()``. tests/site/test_figure_data.py reads them; ``./dev new-chapter`` writes the
one of its figure here."""
