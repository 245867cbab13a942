"""TRL's GRPOTrainer with worldserve as its environment (``environment_factory``), run once at a
tiny size on CPU.

    pip install "trl>=1.16" -e ".[openenv]"      # a third environment: TRL + OpenEnv
    python examples/clients/trl_grpo_env.py --api-key "$WORLDSERVE_API_KEY" --steps 1

Each rollout gets one ``WorldserveShell``: ``reset`` opens a worldserve Terminal session through
the OpenEnv server (``worldserve up`` serves it on :8932) and returns its initial state, which
TRL appends to the prompt; the policy's tool calls (``run``) are steps of that session, answered
by the world model; ``get_reward`` scores the rollout. The policy here is a tiny random Qwen3
built on the spot (nothing is downloaded), so this shows the wiring, not learning; point
``--policy`` at a real instruct model (with a tool-calling chat template) to train one.
"""

from __future__ import annotations

import argparse
import json
import os

from worldserve.frontends.openenv import WorldAction
from worldserve.frontends.openenv_client import WorldEnv

URL = os.environ.get("WORLDSERVE_OPENENV_URL", "http://127.0.0.1:8932")
KEY = os.environ.get("WORLDSERVE_API_KEY", "")
OPENED: list[str] = []  # session ids, for the summary
CALLS: list[str] = []


class WorldserveShell:
    """A simulated Linux shell: one worldserve session per rollout."""

    def __init__(self) -> None:
        self.env = WorldEnv(URL, api_key=KEY, message_timeout_s=300).sync()
        self.env.connect()
        self.turns = 0

    def reset(self, **kwargs: object) -> str:
        result = self.env.reset(domain="TERMINAL", task_instruction="Create notes/todo.txt.",
                                initial_state="$ ls\nREADME.md", max_turns=6)
        OPENED.append(result.metadata["session_id"])
        self.turns = 0
        return "The sandbox:\n" + result.observation.observation

    def run(self, command: str) -> str:
        """Run a bash command in the sandbox and return what it prints.

        Args:
            command: The bash command line to run.
        """
        result = self.env.step(WorldAction(action=command))
        self.turns += 1
        CALLS.append(command)
        return result.observation.observation

    def get_reward(self) -> float:
        return 1.0 if self.turns else 0.0  # a real task would check the simulated state


def tiny_policy(tokenizer_dir: str):  # type: ignore[no-untyped-def]
    """A random 2-layer Qwen3 with the committed tokenizer and Qwen3's tool-calling template."""
    from transformers import AutoTokenizer, Qwen3Config, Qwen3ForCausalLM
    from trl.chat_template_utils import qwen3_chat_template

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    tok.chat_template = qwen3_chat_template
    tok.padding_side = "left"
    tok.pad_token = tok.pad_token or tok.eos_token
    config = Qwen3Config(vocab_size=len(tok), hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                         head_dim=32, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
    return Qwen3ForCausalLM(config), tok


def main() -> None:
    global KEY
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--api-key", default=KEY)
    ap.add_argument("--steps", type=int, default=1)
    ap.add_argument("--tokenizer", default="models/worldserve-tiny-moe")
    ap.add_argument("--out", default="/tmp/worldserve-trl-grpo")
    args = ap.parse_args()
    KEY = args.api_key
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    model, tok = tiny_policy(args.tokenizer)
    data = Dataset.from_list([{"prompt": [{"role": "user", "content": "Make a todo list."}]}] * 4)
    config = GRPOConfig(output_dir=args.out, max_steps=args.steps, per_device_train_batch_size=2,
                        num_generations=2, max_completion_length=48, learning_rate=1e-5,
                        logging_steps=1, report_to="none", use_cpu=True, bf16=False,
                        save_strategy="no")
    trainer = GRPOTrainer(model=model, processing_class=tok, args=config, train_dataset=data,
                          environment_factory=WorldserveShell)
    result = trainer.train()
    print(json.dumps({"train": result.metrics, "log": trainer.state.log_history,
                      "sessions_opened": len(OPENED), "tool_calls": CALLS}, default=str))


if __name__ == "__main__":
    main()
