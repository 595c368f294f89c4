"""The review side: what turns result tables into things people look at.

Figures (:mod:`~tmasim.review.plots`, built on :mod:`~tmasim.review.plot_tables` and
:mod:`~tmasim.review.plot_style`), Chrome traces for Perfetto (:mod:`~tmasim.review.trace`,
checked by :mod:`~tmasim.review.trace_check`), the HTML report (:mod:`~tmasim.review.report`),
their commands, ``tmasim plot`` and ``tmasim report`` (:mod:`~tmasim.review.plot_cli`), and the
pipeline animation, ``tmasim animate`` (:mod:`~tmasim.review.animate`).
Everything here reads tables and summaries only, never the engine.
"""
