"""LoCoMo-lite: generated two-person conversations with a hidden world state, and questions
with gold answers and gold evidence turn ids (`D{session}:{turn}`, as in LoCoMo).

World per conversation: two personas, each with city, job, pet, hobby, a sibling (name,
relation) and the sibling's city/job/pet; dated events ("I ran a marathon yesterday"); one
update per persona (a move or a job change that overrides the earlier value). Facts are
stated by first-person template sentences (`TEMPLATES`, also parsed back by
`memory.TemplateMemoraLLM`), 1-`max_mentions` times, then restated until a session has
(1 - filler_fraction) x turns_per_session fact turns; the rest is filler chit-chat.

Question categories (LoCoMo numbering where one exists): 1 multi-hop (via the sibling bridge),
2 temporal (event date), 4 single-hop (a never-updated attribute), 6 knowledge-update (the
latest value), 5 adversarial (an aspect never mentioned; excluded from recall).
Gold evidence is a list of groups: one group per needed fact, holding every turn that states
it; a group is recalled when any of its turns is retrieved. `evidence` is the flat union.
"""
from __future__ import annotations

import datetime as dt
import random

from .config import SynthConfig

NAMES = ["Alice", "Bob", "Carol", "Dave", "Erin", "Frank", "Grace", "Henry", "Irene", "Jack",
         "Karen", "Liam", "Maya", "Noah", "Olga", "Peter", "Quinn", "Rosa", "Sam", "Tara",
         "Uma", "Victor", "Wendy", "Xavier", "Yara", "Zoe"]
CITIES = ["Boston", "Denver", "Austin", "Seattle", "Chicago", "Portland", "Miami", "Phoenix",
          "Atlanta", "Detroit", "Madison", "Tucson"]
JOBS = ["nurse", "teacher", "architect", "chef", "pilot", "librarian", "plumber", "dentist",
        "journalist", "carpenter", "pharmacist", "firefighter"]
PETS = ["beagle", "parrot", "tabby cat", "hamster", "goldfish", "corgi", "rabbit", "tortoise",
        "poodle", "iguana"]
HOBBIES = ["rock climbing", "pottery", "birdwatching", "salsa dancing", "chess", "gardening",
           "kayaking", "knitting", "baking bread", "astronomy"]
EVENTS = [("ran a marathon", "run a marathon"), ("got a tattoo", "get a tattoo"),
          ("visited the Grand Canyon", "visit the Grand Canyon"),
          ("went to a jazz concert", "go to a jazz concert"), ("bought a new car", "buy a new car"),
          ("painted the kitchen", "paint the kitchen"), ("adopted a houseplant", "adopt a houseplant"),
          ("started a book club", "start a book club")]
NEVER = ["favourite car brand", "blood type", "shoe size", "favourite opera"]
RELS = ["sister", "brother"]

# kind -> first-person templates. Fields: {v} the value, {sib} the sibling's name, {rel}.
TEMPLATES = {
    "city": ["I live in {v} these days.", "Life in {v} is treating me well."],
    "job": ["I work as a {v} now.", "Being a {v} keeps me really busy."],
    "pet": ["My {v} keeps me company at home.", "I spent the morning walking my {v}."],
    "hobby": ["Lately I have been really into {v}.", "I spent the weekend {v} again."],
    "move": ["Big news: I moved to {v} last month!"],
    "newjob": ["Big news: I just started a new job as a {v}!"],
    "sibling": ["My {rel} {sib} called me today.", "I had dinner with my {rel} {sib} yesterday."],
    "sib_city": ["{sib} lives in {v} and loves it there.", "{sib} says the weather in {v} is lovely."],
    "sib_job": ["{sib} works as a {v} these days.", "{sib} is still working as a {v}."],
    "sib_pet": ["{sib} adopted a {v} recently.", "{sib} showed me photos of a {v} that lives with them."],
    "event": ["Guess what, I {v} yesterday!"],
}
FILLER = ["Haha, that sounds fun!", "How was your week?", "Oh nice, tell me more.",
          "I totally agree with you.", "That reminds me, I need more coffee.",
          "Sorry for the late reply, it has been hectic.", "Wow, really?",
          "The weather has been strange lately.", "I watched a funny movie last night.",
          "Let's catch up again soon!", "Hope you're doing well.", "Same here, honestly."]
QUESTIONS = {
    "city": "Where does {p} live?", "job": "What is {p}'s job?", "pet": "What pet does {p} have?",
    "hobby": "What hobby is {p} into?",
    "sib_city": "Where does {p}'s {rel} live?", "sib_job": "What is the job of {p}'s {rel}?",
    "sib_pet": "What pet does {p}'s {rel} have?",
    "event": "When did {p} {v}?", "never": "What is {p}'s {v}?",
}
CATEGORY = {"multi_hop": 1, "temporal": 2, "adversarial": 5, "single_hop": 4, "knowledge_update": 6}


def fmt_date(d: dt.date) -> str:
    return f"{d.day} {d.strftime('%B')} {d.year}"


def _people(rng: random.Random):
    names = rng.sample(NAMES, 4)
    cities, jobs, pets = rng.sample(CITIES, 6), rng.sample(JOBS, 6), rng.sample(PETS, 4)
    hobbies, events = rng.sample(HOBBIES, 2), rng.sample(EVENTS, len(EVENTS))
    personas = []
    for i in range(2):
        personas.append({
            "name": names[i], "city": cities[i], "job": jobs[i], "pet": pets[i], "hobby": hobbies[i],
            "sib": names[2 + i], "rel": rng.choice(RELS),
            "sib_city": cities[2 + i], "sib_job": jobs[2 + i], "sib_pet": pets[2 + i],
            "update": rng.choice(["city", "job"]), "new_city": cities[4 + i], "new_job": jobs[4 + i],
            "events": events[4 * i:4 * i + 4],
        })
    return personas


def generate(cfg: SynthConfig) -> tuple[list[dict], list[dict]]:
    """(conversations, questions). Deterministic in cfg."""
    convs, qas = [], []
    for c in range(cfg.n_conversations):
        rng = random.Random(cfg.seed * 1000 + c)
        conv, qa = _conversation(cfg, rng, c)
        convs.append(conv)
        qas.extend(qa)
    return convs, qas


def _conversation(cfg: SynthConfig, rng: random.Random, c: int):
    personas = _people(rng)
    start = dt.date.fromisoformat(cfg.start_date) + dt.timedelta(days=37 * c)
    dates = [start + dt.timedelta(days=9 * s + rng.randint(0, 4)) for s in range(cfg.n_sessions)]
    # statements: (persona index, fact key, kind, value, session); `pool` holds the facts that
    # may be restated in a session range: (persona index, fact key, kind, value, first, last)
    statements, pool = [], []
    for i, p in enumerate(personas):
        upd = cfg.update_session
        for kind in ("city", "job", "pet", "hobby", "sibling", "sib_city", "sib_job", "sib_pet"):
            first, last = 0, cfg.n_sessions - 1
            if kind == p["update"]:
                last = upd - 1
            v = p.get(kind, "")
            pool.append((i, kind, kind, v, first, last))
            for _ in range(rng.randint(1, cfg.max_mentions)):
                statements.append((i, kind, kind, v, rng.randint(first, last)))
        new_kind = "move" if p["update"] == "city" else "newjob"
        new_v = p["new_city"] if p["update"] == "city" else p["new_job"]
        statements.append((i, "new_" + p["update"], new_kind, new_v, upd))
        if upd + 1 < cfg.n_sessions:
            pool.append((i, "new_" + p["update"], p["update"], new_v, upd + 1, cfg.n_sessions - 1))
        for e in range(cfg.n_events):
            statements.append((i, f"event{e}", "event", p["events"][e][0], rng.randint(0, cfg.n_sessions - 1)))
    # top up each session to (1 - filler_fraction) x turns_per_session fact turns with restatements
    want = round((1 - cfg.filler_fraction) * cfg.turns_per_session)
    for s in range(cfg.n_sessions):
        have = sum(st[4] == s for st in statements)
        ok = [f for f in pool if f[4] <= s <= f[5]]
        for _ in range(max(0, want - have)):
            i, key, kind, v, _, _ = rng.choice(ok)
            statements.append((i, key, kind, v, s))
    by_session = {s: [st for st in statements if st[4] == s] for s in range(cfg.n_sessions)}
    sessions, mentions = [], {}  # mentions[(i, key)] = [turn ids]
    event_dates = {}
    for s in range(cfg.n_sessions):
        todo = by_session[s]
        rng.shuffle(todo)
        n_turns = max(len(todo), round(len(todo) / (1 - cfg.filler_fraction)))
        slots = sorted(rng.sample(range(n_turns), len(todo)))
        turns, k = [], 0
        for t in range(n_turns):
            tid = f"D{s + 1}:{t + 1}"
            if k < len(todo) and slots[k] == t:
                i, key, kind, v, _ = todo[k]
                k += 1
                p = personas[i]
                text = rng.choice(TEMPLATES[kind]).format(v=v, sib=p["sib"], rel=p["rel"])
                text += " " + rng.choice(FILLER) if rng.random() < 0.5 else ""
                speaker = p["name"]
                mentions.setdefault((i, key), []).append(tid)
                if kind == "event":
                    event_dates[(i, key)] = dates[s] - dt.timedelta(days=1)
            else:
                speaker = personas[t % 2]["name"]
                text = rng.choice(FILLER)
            turns.append({"dia_id": tid, "speaker": speaker, "text": text})
        sessions.append({"session": s + 1, "date": dates[s].isoformat(), "turns": turns})
    conv = {"conv_id": f"c{c}", "speakers": [p["name"] for p in personas], "sessions": sessions}
    qa = []

    def add(cat, q, answer, groups, stale=None):
        qa.append({"conv_id": conv["conv_id"], "qid": f"c{c}-q{len(qa)}", "category": cat,
                   "category_id": CATEGORY[cat], "question": q, "answer": answer,
                   "evidence_groups": groups, "evidence": sorted({t for g in groups for t in g}),
                   "stale": stale})

    for i, p in enumerate(personas):
        for kind in ("city", "job", "pet", "hobby"):
            if kind == p["update"]:
                add("knowledge_update", QUESTIONS[kind].format(p=p["name"]), p["new_" + kind],
                    [mentions[(i, "new_" + kind)]], stale=p[kind])
            else:
                add("single_hop", QUESTIONS[kind].format(p=p["name"]), p[kind], [mentions[(i, kind)]])
        for kind in ("sib_city", "sib_job", "sib_pet"):
            add("multi_hop", QUESTIONS[kind].format(p=p["name"], rel=p["rel"]), p[kind],
                [mentions[(i, "sibling")], mentions[(i, kind)]])
        for e in range(cfg.n_events):
            add("temporal", QUESTIONS["event"].format(p=p["name"], v=p["events"][e][1]),
                fmt_date(event_dates[(i, f"event{e}")]), [mentions[(i, f"event{e}")]])
        add("adversarial", QUESTIONS["never"].format(p=p["name"], v=NEVER[(c + i) % len(NEVER)]),
            "not mentioned", [])
    return conv, qa


def history_text(conv: dict) -> str:
    return "\n".join(f"{t['speaker']}: {t['text']}" for s in conv["sessions"] for t in s["turns"])
