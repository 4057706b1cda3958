"""Score a served model's greedy answers against gold answers, as an evaluation harness would.

The prompts are tune's probe set (``objectives.probes``: the same token-id prompts, inside the
served model's vocabulary, answered greedily one at a time); the gold answers are a JSON file
of what a reference deployment answered (``--write-gold`` writes it from the server it asks).
It prints two scores, each on a line of its own:

    exact_match: 0.625   (the share of prompts answered token for token like the gold)
    token_match: 0.977   (the share of answer tokens in the gold's place)

It talks to the given server only (no network beyond it, no model hub), so it serves as a
space's ``quality.command`` where no lm-eval task fits the model, e.g. on a random-weight one:

    quality:
      command:
        argv: [python, scripts/answer_eval.py, --url, "{url}", --model, "{model}",
               --gold, gold.json]
        score: "token_match: ([0-9.]+)"
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from objectives.agreement import agreement
from objectives.endpoint import Endpoint
from objectives.probes import PROBE_COUNT, PROBE_MAX_TOKENS, answer_probes, probe_set
from objectives.vocab import find_vocab


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--url", required=True, help="the server's base URL (http://HOST:PORT)")
    ap.add_argument("--model", required=True, help="the model name requests carry")
    ap.add_argument("--gold", type=Path, required=True, help="the gold answers (JSON)")
    ap.add_argument("--write-gold", action="store_true", help="write the answers as the gold")
    ap.add_argument("--probes", type=int, default=PROBE_COUNT, help="prompts asked")
    ap.add_argument("--max-tokens", type=int, default=PROBE_MAX_TOKENS, help="answer length")
    args = ap.parse_args(argv)
    endpoint = Endpoint(model=args.model, base_url=args.url)
    vocab, _ = find_vocab(None, args.model, args.url)
    probes = probe_set(vocab.id_bound() if vocab else None, args.probes, args.max_tokens)
    answers = answer_probes(endpoint, probes)
    if args.write_gold:
        args.gold.write_text(json.dumps({"answers": answers}))
        print(f"wrote {len(answers)} gold answers to {args.gold}")
        return 0
    gold = json.loads(args.gold.read_text())["answers"]
    scored = agreement(answers, gold)
    print(f"exact_match: {scored.exact:.4f}")
    print(f"token_match: {scored.tokens:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
