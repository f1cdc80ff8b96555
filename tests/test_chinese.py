"""Chinese as readers paste it: jieba words, characters, full-width separators, mixed scripts,
the token limit after segmentation, the URL round trip, and jieba kept off the hot path.

The expected words are jieba 0.42.1's own (default dictionary, HMM on), checked by hand: each
is a sensible word, with one quirk of jieba's kept as it gives it (就学 / 不到 for 就 / 学不到).
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qsl, urlencode

import pytest

from attention.spec import AttentionSpec
from attention.text.tokens import MAX_INPUT_CHARS, MAX_TOKENS, TokenError, parse, parse_tokens, tokens_to_text
from tests.test_tokens import refusal

ROOT = Path(__file__).resolve().parent.parent
TITLE = "深入解析Attention机制：为什么自注意力评分越高模型表现越好？"

# Sentences in the spirit of the seed article, and their words (" / " between them).
SENTENCES = {
    TITLE: "深入 / 解析 / Attention / 机制 / ： / 为什么 / 自 / 注意力 / 评分 / 越高 / 模型 / 表现 / 越 / 好 / ？",
    "注意力机制让每个词元都能关注序列中的其他词元。":
        "注意力 / 机制 / 让 / 每个 / 词元 / 都 / 能 / 关注 / 序列 / 中 / 的 / 其他 / 词元 / 。",
    "缩放点积注意力把分数除以键维度的平方根，再经过softmax得到权重。":
        "缩放 / 点积 / 注意力 / 把 / 分数 / 除以 / 键 / 维度 / 的 / 平方根 / ， / 再 / 经过 / "
        "softmax / 得到 / 权重 / 。",
    "如果不做缩放，softmax会饱和，梯度几乎为零，模型就学不到哪些词元重要。":
        "如果 / 不 / 做 / 缩放 / ， / softmax / 会 / 饱和 / ， / 梯度 / 几乎 / 为 / 零 / ， / 模型 / "
        "就学 / 不到 / 哪些 / 词元 / 重要 / 。",
    "评分越高并不代表模型越好：最尖锐的注意力可能对应最差的模型。":
        "评分 / 越高 / 并 / 不 / 代表 / 模型 / 越 / 好 / ： / 最 / 尖锐 / 的 / 注意力 / 可能 / 对应 / "
        "最差 / 的 / 模型 / 。",
}


@pytest.mark.parametrize("sentence, words", SENTENCES.items())
def test_sentences_as_written_become_jieba_words(sentence, words):
    expected = words.split(" / ")
    assert parse(sentence) == (expected, "chinese")      # detected: no spaces, Chinese
    assert parse_tokens(sentence, "chinese") == expected


def test_the_seed_title_gives_15_tokens():
    assert len(parse_tokens(TITLE)) == 15


def test_characters_format():
    assert parse_tokens("猫坐在垫子上，因为它很累。", "characters") == list("猫坐在垫子上，因为它很累。")
    assert parse_tokens(TITLE, "characters")[:6] == ["深", "入", "解", "析", "Attention", "机"]
    assert parse_tokens("Wait, what", "characters") == ["Wait", ",", "what"]


@pytest.mark.parametrize("text, expected", [
    ("猫，狗、鸟；鱼", ["猫", "狗", "鸟", "鱼"]),
    ("red，green, blue", ["red", "green", "blue"]),
    ("深度学习，自然语言处理", ["深度学习", "自然语言处理"]),
])
def test_full_width_separators_are_commas(text, expected):
    assert parse_tokens(text, "comma") == expected


@pytest.mark.parametrize("text, expected", [
    ("猫，狗，鸟", ["猫", "狗", "鸟"]),                             # a list of single words
    ("猫\n狗\n鸟", ["猫", "狗", "鸟"]),
    ("猫 坐 在 垫子 上 。", ["猫", "坐", "在", "垫子", "上", "。"]),   # already spaced by hand
    ("我们用PyTorch 2.13训练了一个小型Transformer模型。",            # mixed scripts
     ["我们", "用", "PyTorch", "2.13", "训练", "了", "一个", "小型", "Transformer", "模型", "。"]),
    ("我用 self-attention 训练模型, it works", ["我用", "self-attention", "训练", "模型", ",", "it",
                                             "works"]),
    ("Wait, what", ["Wait", "what"]),                                # no Chinese: as before
])
def test_auto_detection_with_chinese(text, expected):
    assert parse_tokens(text) == expected


def test_the_limit_applies_after_segmentation():
    assert parse_tokens("我们" * MAX_TOKENS) == ["我们"] * MAX_TOKENS
    err = refusal("我们" * (MAX_TOKENS + 1))
    assert err.key == "errors.tokens_too_many_words"
    assert f"{MAX_TOKENS:,}" in err.message("en") and f"{MAX_TOKENS:,}" in err.message("zh")
    assert len(parse_tokens("猫" * MAX_TOKENS, "characters")) == MAX_TOKENS
    assert refusal("猫" * (MAX_TOKENS + 1), "characters").key == "errors.tokens_too_many_words"


@pytest.mark.parametrize("fmt", ["auto", "chinese", "characters"])
def test_hostile_chinese_without_spaces_at_the_character_limit(fmt):
    """200,000 characters in one run: refused with its sentence (segmentation stops early)."""
    text = "".join(chr(0x4E00 + (i * 7919) % 20000) for i in range(MAX_INPUT_CHARS))
    assert refusal(text, fmt).key == "errors.tokens_too_many_words"
    assert refusal(text + "字", fmt).key == "errors.tokens_too_many_chars"


@pytest.mark.parametrize("sep", ["\n", " ", "，"])
def test_hostile_lists_of_100000_chinese_words_are_refused_with_their_count(sep):
    """Auto detection looks at no more pieces than the limit allows, then the list is refused."""
    err = refusal(sep.join(["猫"] * 99_999))
    assert err.key == "errors.tokens_too_many" and err.values["count"] == 99_999


@pytest.mark.parametrize("sentence", [*SENTENCES, "猫，狗，鸟", "我用 self-attention 训练模型"])
def test_segmented_tokens_reopen_identical_through_the_url(sentence):
    tokens = tuple(parse_tokens(sentence))
    assert parse_tokens(tokens_to_text(tokens)) == list(tokens)
    spec = AttentionSpec(tokens=tokens)
    url_params = dict(parse_qsl(urlencode(spec.to_query()), keep_blank_values=True))
    assert AttentionSpec.from_query(url_params) == spec


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=True)


def test_jieba_is_not_imported_without_chinese():
    out = _run("import sys\n"
               "from attention.text.tokens import parse_tokens, tokens_to_text\n"
               "from attention.spec import AttentionSpec\n"
               "parse_tokens('The animal didn\\'t cross the street, because it was tired')\n"
               "for fmt in ('comma', 'characters', 'chinese'): parse_tokens('Wait, what', fmt)\n"
               "AttentionSpec.from_query(AttentionSpec().to_query())\n"
               "print('jieba' in sys.modules)\n")
    assert out.stdout.strip() == "False"


def test_concurrent_first_loads_agree_and_print_nothing():
    """Eight threads segment at once in a fresh process: one load, same words, silent stderr."""
    out = _run("import sys, threading\n"
               "from attention.text.tokens import parse_tokens\n"
               f"text = {TITLE!r}\n"
               "results = []\n"
               "threads = [threading.Thread(target=lambda: results.append(parse_tokens(text)))\n"
               "           for _ in range(8)]\n"
               "[t.start() for t in threads]; [t.join() for t in threads]\n"
               "print(len(results), len({tuple(r) for r in results}), len(results[0]))\n")
    assert out.stdout.split() == ["8", "1", "15"]
    assert out.stderr == ""


def test_only_token_errors_come_out_of_the_segmenting_formats():
    for text in ["", "，、；", "\x00猫\x07", "[猫", "猫" * 101 + " x" * 5]:
        for fmt in ("chinese", "characters"):
            try:
                tokens = parse_tokens(text, fmt)
            except TokenError as err:
                assert err.message("zh")
                continue
            assert tokens and all(tokens)
