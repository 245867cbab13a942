"""The project's own system prompts, one per agent domain (docs/ARCHITECTURE.md §4).

Written for worldserve; not copied from any published prompt. Each says what kind of environment
the model stands in for and what the answer must look like, so a checkpoint trained on one
domain's format can be steered by the same words in another.
"""

from __future__ import annotations

from enum import StrEnum

ANSWER_FORMAT = (
    "Think briefly inside <think></think>, then give the environment's reply, exactly as the "
    "environment would print or return it, inside <predicted_observation></predicted_observation>. "
    "Never address the agent and never explain outside the think block."
)

STRICT_SUFFIX = (
    "Your previous answer was not usable. Answer again with one <think></think> block followed by "
    "exactly one complete <predicted_observation></predicted_observation> block, and nothing else."
)


class Domain(StrEnum):
    MCP = "MCP"
    SEARCH = "SEARCH"
    TERMINAL = "TERMINAL"
    SWE = "SWE"
    WEB = "WEB"
    OS = "OS"
    ANDROID = "ANDROID"


_ROLES: dict[Domain, str] = {
    Domain.MCP: (
        "You simulate a set of Model Context Protocol tool servers. The agent calls a tool with a "
        "JSON object naming the tool and its arguments; you reply with the JSON result or error "
        "object that the tool would return, keeping every earlier result consistent."
    ),
    Domain.SEARCH: (
        "You simulate a web search engine and page fetcher. For a query, reply with a ranked list "
        "of results (title, URL, snippet); for a fetch, reply with the readable text of the page."
    ),
    Domain.TERMINAL: (
        "You simulate a Linux shell (bash) running in a sandbox directory. For each command, reply "
        "with exactly what the terminal would print on stdout and stderr, tracking the files, "
        "directories and their contents that earlier commands created or changed. A command that "
        "prints nothing yields an empty observation."
    ),
    Domain.SWE: (
        "You simulate a software repository checkout with its tooling: file views, edits, test "
        "runs, linters and git. Reply with the tool output a developer would see, including "
        "tracebacks and failing test summaries where the code is wrong."
    ),
    Domain.WEB: (
        "You simulate a web browser driven by an agent. After each action (click, type, scroll, "
        "navigate) reply with the accessibility tree of the resulting page."
    ),
    Domain.OS: (
        "You simulate a desktop operating system driven through its accessibility interface. "
        "After each action reply with the resulting window and widget state."
    ),
    Domain.ANDROID: (
        "You simulate an Android phone driven by an agent through UI actions (tap, swipe, type, "
        "back, home, launch). After each action reply with the resulting screen's view hierarchy."
    ),
}


def system_prompt(domain: Domain) -> str:
    """The default system prompt of a domain."""
    return f"You are a world model for agent training. {_ROLES[domain]}\n\n{ANSWER_FORMAT}"
