"""Altair chart builders: pure functions, DataFrame (or Analysis) in, alt.Chart out.

One module per family of charts (heatmap, scores, model, experiment), one builder per chart
kind. Colour: sequential scales for weights, diverging scales centred on 0 for differences.
"""

__all__: list[str] = []   # import its modules: charts.<module>
