"""LoCoMo and LongMemEval loaders on small local files written in the real formats."""
import hashlib
import json

import pytest

from methods.core.results import InputError
from methods.memora import loaders

LOCOMO = [{
    "sample_id": "conv-26",
    "conversation": {
        "speaker_a": "Caroline", "speaker_b": "Melanie",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Caroline", "dia_id": "D1:1", "text": "Hey Mel! I went to a LGBTQ support group yesterday."},
            {"speaker": "Melanie", "dia_id": "D1:2", "text": "Wow, look at this.", "img_url": ["http://x"],
             "blip_caption": "a photo of a sunset"},
        ],
        "session_2_date_time": "1:14 pm on 25 May, 2023",
        "session_2": [{"speaker": "Melanie", "dia_id": "D2:1", "text": "I ran a charity race last Saturday."}],
        "session_10_date_time": "8:56 pm on 20 July, 2023",
        "session_10": [{"speaker": "Caroline", "dia_id": "D10:1", "text": "Counseling it is."}],
    },
    "qa": [
        {"question": "When did Caroline go to the LGBTQ support group?", "answer": "7 May 2023",
         "evidence": ["D1:1"], "category": 2},
        {"question": "How many races?", "answer": 2, "evidence": ["D2:1", "D10:1"], "category": 1},
        {"question": "What did Caroline adopt?", "adversarial_answer": "a dog", "evidence": ["D2:1"], "category": 5},
    ],
    "event_summary": {}, "observation": {}, "session_summary": {},
}]

LME = [{
    "question_id": "gpt4_2655b836", "question_type": "temporal-reasoning",
    "question": "What was the first issue I had with my new car?", "answer": "GPS system not functioning",
    "question_date": "2023/04/10 (Mon) 23:07",
    "haystack_dates": ["2023/04/10 (Mon) 17:50", "2023/04/10 (Mon) 14:47"],
    "haystack_session_ids": ["sharegpt_1", "answer_4be1b6b4_2"],
    "haystack_sessions": [
        [{"role": "user", "content": "Tell me a joke."}, {"role": "assistant", "content": "Why..."}],
        [{"role": "user", "content": "My car's GPS stopped working.", "has_answer": True},
         {"role": "assistant", "content": "Sorry to hear."}],
    ],
    "answer_session_ids": ["answer_4be1b6b4_2"],
}, {
    "question_id": "abc_abs", "question_type": "single-session-user", "question": "What is my cat's name?",
    "answer": "You did not mention this information.", "question_date": "2023/05/01 (Mon) 10:00",
    "haystack_dates": ["2023/04/30 (Sun) 09:00"], "haystack_session_ids": ["s1"],
    "haystack_sessions": [[{"role": "user", "content": "I have a dog."}]], "answer_session_ids": ["s1"],
}]


def test_locomo(tmp_path):
    p = tmp_path / "locomo10.json"
    p.write_text(json.dumps(LOCOMO))
    convs, qas = loaders.load_locomo(str(p), hashlib.sha256(p.read_bytes()).hexdigest())
    [c] = convs
    assert [s["session"] for s in c["sessions"]] == [1, 2, 10]            # numeric, not lexical, order
    assert [s["date"] for s in c["sessions"]] == ["2023-05-08", "2023-05-25", "2023-07-20"]
    assert c["sessions"][0]["turns"][1]["text"] == "Wow, look at this. [shares an image: a photo of a sunset]"
    assert c["speakers"] == ["Caroline", "Melanie"]
    assert [q["category"] for q in qas] == ["temporal", "multi_hop", "adversarial"]
    assert qas[1]["answer"] == "2" and qas[1]["evidence_groups"] == [["D2:1"], ["D10:1"]]
    assert qas[2]["answer"] == "a dog" and qas[2]["evidence_groups"] == []
    assert loaders.load_locomo(str(p), limit=1)[0] == convs


def test_locomo_hash_mismatch_and_missing(tmp_path):
    p = tmp_path / "locomo10.json"
    p.write_text(json.dumps(LOCOMO))
    with pytest.raises(InputError, match="sha256"):
        loaders.load_locomo(str(p), "0" * 64)
    with pytest.raises(InputError, match="missing dataset file"):
        loaders.load_locomo(str(tmp_path / "nope.json"))


def test_longmemeval(tmp_path):
    p = tmp_path / "longmemeval_s.json"
    p.write_text(json.dumps(LME))
    convs, qas = loaders.load_longmemeval(str(p))
    assert [c["conv_id"] for c in convs] == ["gpt4_2655b836", "abc_abs"]
    s = convs[0]["sessions"]
    assert [x["date"] for x in s] == ["2023-04-10", "2023-04-10"] and s[1]["session_id"] == "answer_4be1b6b4_2"
    assert s[1]["turns"][0] == {"dia_id": "D2:1", "speaker": "user", "text": "My car's GPS stopped working."}
    assert qas[0]["evidence_groups"] == [["D2:1"]] and qas[0]["category"] == "temporal-reasoning"
    assert qas[1]["category"] == "single-session-user" and qas[1]["abstention"] is True
    assert qas[1]["evidence_groups"] == [] and qas[0]["abstention"] is False
