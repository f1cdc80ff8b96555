"""Pure tensor measures of attention: rows, head statistics, rollout, flow, pooling, sinks, rank."""

__all__: list[str] = []   # import its modules: measures.<module>
