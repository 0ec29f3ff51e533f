#!/usr/bin/env python3
"""Test oracle: encodes texts with the Hugging Face `tokenizers` library.

Usage: hf_encode.py TOKENIZER_JSON TEXTS_JSONL OUT_JSONL
Each input line is a JSON string; each output line is the JSON array of the
ids of encode(text, add_special_tokens=False).
"""
import json
import sys

from tokenizers import Tokenizer

tok = Tokenizer.from_file(sys.argv[1])
with open(sys.argv[2], encoding="utf-8") as src, open(sys.argv[3], "w", encoding="utf-8") as out:
    for line in src:
        text = json.loads(line)
        out.write(json.dumps(tok.encode(text, add_special_tokens=False).ids) + "\n")
