"""DPO loss oracle in float64 autograd: the loss of Rafailov et al. (2023) as
TRL writes its sigmoid variant, -logsigmoid(beta * (pi_logratios - ref_logratios)),
averaged over the pairs, and its gradient with respect to the policy's summed
log-probabilities of the chosen and the rejected answers.

Usage: dpo_ref.py IN.json OUT.json
IN:  {"beta", "policy_chosen", "policy_rejected", "reference_chosen", "reference_rejected"} (lists of n)
OUT: {"loss", "dchosen", "drejected", "chosen_rewards", "rejected_rewards"}
"""
import json
import sys

import torch
import torch.nn.functional as F


def main():
    spec = json.load(open(sys.argv[1]))
    t = lambda k, grad: torch.tensor(spec[k], dtype=torch.float64, requires_grad=grad)
    pc, pr = t("policy_chosen", True), t("policy_rejected", True)
    rc, rr = t("reference_chosen", False), t("reference_rejected", False)
    beta = spec["beta"]
    logits = (pc - pr) - (rc - rr)
    loss = (-F.logsigmoid(beta * logits)).mean()
    loss.backward()
    json.dump({"loss": loss.item(), "dchosen": pc.grad.tolist(), "drejected": pr.grad.tolist(),
               "chosen_rewards": (beta * (pc - rc)).tolist(), "rejected_rewards": (beta * (pr - rr)).tolist()},
              open(sys.argv[2], "w"))


if __name__ == "__main__":
    main()
