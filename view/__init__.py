"""``distill view``: one offline HTML page of a stage directory or a whole recipe run (view/page.py).

collect.py finds what a path holds (stages, evaluations, training runs, the run's report), rows.py reads and
samples its tables, page.py writes the page from the template in assets/, serve.py serves the same page with
rows read on demand. Model text is untrusted: it travels as JSON and the page only ever sets it as text.
"""
