#!/usr/bin/env python3
"""Builds the tokenizer fixtures of tests/tokenizer from the reference
Hugging Face `tokenizers` library and a jinja2 rendering of Qwen2.5's chat
template.

Usage: make_tokenizer_fixture.py [MODEL_DIR] [OUT_DIR]
  MODEL_DIR defaults to models/qwen2.5-0.5b-instruct (the copy committed in
  the repository), OUT_DIR to tests/fixtures/tokenizer.

Writes
  qwen25_ids.jsonl     {"text", "ids", "decoded"}: ids of encode(text) (no
                       special tokens added) and decode(ids) with special
                       tokens kept;
  qwen25_decode.jsonl  {"ids", "decoded"}: decodes of id sequences that cut
                       characters apart (lossy U+FFFD replacement);
  qwen25_chat.jsonl    {"messages", "add_generation_prompt", "text"}:
                       chat_template.jinja rendered by jinja2.
Needs: pip install tokenizers jinja2 (test oracles only).
"""
import json
import random
import sys
import unicodedata
from pathlib import Path

import jinja2
import jinja2.sandbox
from tokenizers import Tokenizer

REPO = Path(__file__).resolve().parent.parent
MODEL = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "models/qwen2.5-0.5b-instruct"
OUT = Path(sys.argv[2]) if len(sys.argv) > 2 else REPO / "tests/fixtures/tokenizer"

FIXED = [
    "",
    " ",
    "Hello, world!",
    "hello world",
    " hello  world ",
    # digits
    "0", "12345", "3.14159", "1,000,000", "2024-01-01T12:30:00Z", "v1.2.3", "x=42;y=-7",
    "The 3 little pigs had 10 houses and 1000 bricks.", "٣٤٥ ١٢", "Ⅻ ½ ² ①",
    # contractions
    "I'm", "don't", "WE'LL", "it'S", "she'd", "they've", "you're", "'s", "o'clock", "rock'n'roll",
    "I'M HERE, YOU'RE THERE", "it'ſ", "'", "''", "'''s", "l'ufficio", "dell'azione",
    # whitespace runs
    "a  b", "a   b", "a\tb", "a\t\tb", "\n", "\n\n\n", "a\nb", "a\n\nb", "  \n  \n", "x \r\n y", "\r\n",
    "trailing   ", "   leading", "\t\t\tindented", "line1\n    line2\n\tline3", " \n ", "a \n\n b",
    " " * 50, "\n" * 20, "\t" * 7 + "x", "a" + " " * 17 + "b", "\u00a0\u00a0x", "a\u3000\u3000b",
    "\u2028\u2028x", "\x0b\x0b1", "\x0c\x0cpage", "\x1c\x1cx", " \x1c1", "x\u0085y", "\u2009\u2009thin",
    # accents and normalisation
    "café", "cafe\u0301", "naïve", "Ångström", "\u212bngstrom", "e\u0301\u0301", "\u0301abc", "ñandú",
    "Zürich, Köln, Kraków", "\u1100\u1161\u11a8", "ﬁ ligature", "ǅemal", "İstanbul ıi",
    "perché è così, più già", "ÀÉÎÕÜ àéîõü",
    # emoji
    "👍", "👍🏽", "👨‍👩‍👧", "🇮🇹🇯🇵", "I ❤️ you", "😀😃😄😁", "🤖 says hi", "a👍b", "✅ done",
    # CJK and other scripts
    "你好，世界", "日本語のテキストです。", "한국어 텍스트", "中文English混合", "東京2024年",
    "Привет, мир!", "Γειά σου Κόσμε", "مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया", "สวัสดีชาวโลก",
    "ქართული", "Ελληνικά και русский и English", "ٱلْعَرَبِيَّة",
    # special and added tokens inside text
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|im_start|>user\nhi<|im_end|>\n",
    "<|im_start|>system\nYou are Qwen.<|im_end|>\n<|im_start|>assistant\n",
    "hello<|im_end|>world", "<|im_start|><|im_end|>", "<|im_sta", "<|im_end", "<|<|im_end|>|>",
    "text <|endoftext|> more", "<tool_call>{\"a\": 1}</tool_call>", "<|fim_prefix|>def f():<|fim_suffix|>",
    "<|vision_start|><|image_pad|><|vision_end|>", "< |im_end| >", "<|IM_END|>", "<|endoftext|><|endoftext|>",
    " <|im_end|> ", "\n<|im_end|>\n",
    # invalid-looking and control characters
    "\ufffd", "\u200b\u200bx", "\x00", "a\x00b", "\x01\x02\x03", "\x7f", "\ud7ff", "\U0010ffff", "\ufeffBOM",
    "\U0001d400\U0001d401", "\ue000private", "\u00ad soft hyphen", "\u200d", "%s %d %%", "\\n\\t\\\\",
    # code, markup, urls
    "def f(x):\n    return x ** 2\n", "for (int i = 0; i < n; ++i) { sum += a[i]; }",
    '{"key": "value", "list": [1, 2, 3]}', "<html><body>Hi</body></html>", "https://example.com/a?b=c&d=e",
    "user@example.com", "#!/bin/bash\necho $HOME", "C:\\Users\\me\\file.txt", "SELECT * FROM t WHERE id=1;",
    "a+b=c", "!!!???...", "---", "====", "=" * 100, "a" * 200, "ab" * 60, "...", "…", "“quoted” ‘single’",
    "«guillemets»", "— dash – en", "$100 €50 £3 ¥1000", "50% off!!!", "(parenthesised)", "[bracketed]",
]


def seed_lines():
    """Real Italian sentences: the first 40 non-empty lines of the tutorial
    seed that SPEC.md is built on, committed as tests/fixtures/tokenizer/seed_lines.txt."""
    path = REPO / "tests/fixtures/tokenizer/seed_lines.txt"
    return [l for l in path.read_text(encoding="utf-8").splitlines() if l.strip()]


def random_strings(rng, count):
    pieces = [
        "the", "The", " office", " printer", "queue", "Wi-Fi", " è", "perché", "'s", "'LL", " ", "  ", "\t",
        "\n", "\r\n", "\n\n", "123", "7", "4.5", "你好", "世界", "🙂", "👍🏽", "é", "e\u0301", "ß", "Ω", "Жж",
        "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|", "|>", "<", ">", "!", "?", ".", ",", "...", "'",
        '"', "(", ")", "-", "_", "/", "\\", "#", "@", "\u00a0", "\u3000", "\u200b", "\x00", "ǅ", "ſ", "İ",
        "ab", "xyz", "QWEN", "Ok", "🇮🇹", "\U0001f9d1\u200d\U0001f4bb", "٣", "½", "²",
    ]
    out = []
    for _ in range(count):
        n = rng.randint(1, 12)
        out.append("".join(rng.choice(pieces) for _ in range(n)))
    # Random code points from assorted blocks.
    blocks = [(0x20, 0x7E), (0xA0, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x6FF), (0x900, 0x97F),
              (0x2000, 0x206F), (0x3000, 0x30FF), (0x4E00, 0x4FFF), (0xAC00, 0xAD00), (0x1F300, 0x1F6FF)]
    for _ in range(count // 2):
        s = []
        for _ in range(rng.randint(1, 16)):
            lo, hi = rng.choice(blocks)
            c = rng.randint(lo, hi)
            s.append(chr(c))
        out.append("".join(s))
    return out


def main():
    rng = random.Random(20240601)
    tok = Tokenizer.from_file(str(MODEL / "tokenizer.json"))
    texts = FIXED + seed_lines() + random_strings(rng, 160)
    OUT.mkdir(parents=True, exist_ok=True)

    with open(OUT / "qwen25_ids.jsonl", "w", encoding="utf-8") as f:
        for text in texts:
            ids = tok.encode(text, add_special_tokens=False).ids
            decoded = tok.decode(ids, skip_special_tokens=False)
            f.write(json.dumps({"text": text, "ids": ids, "decoded": decoded}) + "\n")

    # Sequences that cut multi-byte characters apart, plus specials.
    with open(OUT / "qwen25_decode.jsonl", "w", encoding="utf-8") as f:
        pool = [i for t in ["é你好🙂👍🏽 ß", "Жж Ω", "\U0001f9d1\u200d\U0001f4bb"] for i in tok.encode(t).ids]
        pool += list(range(0, 256)) + [151643, 151644, 151645, 151657]
        for _ in range(60):
            ids = [rng.choice(pool) for _ in range(rng.randint(1, 8))]
            f.write(json.dumps({"ids": ids, "decoded": tok.decode(ids, skip_special_tokens=False)}) + "\n")

    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    template = env.from_string((MODEL / "chat_template.jinja").read_text(encoding="utf-8"))
    chats = [
        [{"role": "user", "content": "Hello!"}],
        [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi"}],
        [{"role": "user", "content": "La stampante non stampa."},
         {"role": "assistant", "content": "Riprendi la coda di stampa."},
         {"role": "user", "content": "Grazie!"}],
        [{"role": "system", "content": ""}, {"role": "user", "content": ""}],
        [{"role": "user", "content": "a"}, {"role": "system", "content": "late system"},
         {"role": "assistant", "content": ""}],
        [{"role": "user", "content": "multi\nline\n\ncontent  "}],
        [{"role": "user", "content": "call a tool"}, {"role": "assistant", "content": "ok"},
         {"role": "tool", "content": "{\"r\": 1}"}, {"role": "tool", "content": "second"},
         {"role": "user", "content": "and?"}],
        [{"role": "tool", "content": "first"}],
    ]
    with open(OUT / "qwen25_chat.jsonl", "w", encoding="utf-8") as f:
        for messages in chats:
            for gen in (False, True):
                text = template.render(messages=messages, add_generation_prompt=gen)
                f.write(json.dumps({"messages": messages, "add_generation_prompt": gen, "text": text}) + "\n")
    print(f"{len(texts)} strings, 60 decodes, {2 * len(chats)} chats -> {OUT}")


if __name__ == "__main__":
    main()
