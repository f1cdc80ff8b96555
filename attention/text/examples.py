"""Ready-made inputs for the example picker: each shows something about attention.

Chinese examples are written as Chinese is (no spaces between words): the parser segments
them, as it does what a reader pastes.
"""
from __future__ import annotations

# The input a session starts on when its interface is in this language and its link has none
# (other languages start on AttentionSpec()'s default tokens).
DEFAULT_TEXT = {"zh": "为什么自注意力评分越高模型表现越好？"}

_PASSAGE = (
    "Attention lets every token look at every other token and decide how much of each to "
    "take. A query is compared with every key by a dot product; the scores are divided by "
    "the square root of the key dimension, turned into weights by a softmax, and used to "
    "average the values. Without the division the scores grow with the dimension, the "
    "softmax saturates, and almost all the weight lands on one token. That looks confident "
    "but it is not better: the gradient that flows back through a saturated softmax is close "
    "to zero, so the model stops learning which tokens matter. "
)

EXAMPLES: dict[str, str] = {
    "coreference": "The animal didn't cross the street because it was too tired",
    "repeated": "the cat sat on the mat and the dog sat on the cat",
    "code": '["def", "add", "(", "a", ",", "b", ")", ":", "return", "a", "+", "b"]',
    "chinese": "猫坐在垫子上，因为它很累。",
    "chinese_mixed": "深入解析Attention机制：为什么自注意力评分越高模型表现越好？",
    "passage": " ".join((_PASSAGE * 4).split()[:300]),
}
