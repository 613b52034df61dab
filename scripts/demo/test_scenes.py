#!/usr/bin/env python3
"""Checks of scenes.py (`just demo-scenes-test`; stdlib unittest + Pillow, no torch):

- determinism: the same seed writes the same bytes (every PNG and the JSONL), another seed does not;
- every answer follows from the scene's recorded objects and sign, and each question is asked only
  when it is unambiguous (one triangle for "what colour is the triangle", ...);
- what is recorded is what is drawn: each object's centre pixel has its colour, boxes lie inside the
  image and do not overlap;
- the sizes reach the plugin's extremes (under min_pixels, 20:1 and beyond, exactly 200:1) and never
  pass smart_resize's 200:1 bound;
- the chat framing equals the qwen2_5_vl plugin's frame (plugins/qwen2_5_vl/testdata/cases.json,
  generated from transformers) and, where jinja2 is importable, the hub template's rendering.
"""

import json
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import scenes  # noqa: E402

from PIL import Image  # noqa: E402

COUNT = 400
SEED = 7


def read(path, mode="rb"):
    with open(path, mode) as f:
        return f.read()


def read_dir(d):
    return {name: read(os.path.join(d, name)) for name in sorted(os.listdir(d))}


class ScenesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = os.path.join(cls.tmp.name, "a")
        cls.lines = scenes.write(SEED, COUNT, cls.dir)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_deterministic(self):
        again = os.path.join(self.tmp.name, "b")
        scenes.write(SEED, COUNT, again)
        a, b = read_dir(self.dir), read_dir(again)
        self.assertEqual(sorted(a), sorted(b))
        for name in a:
            self.assertEqual(a[name], b[name], name)
        other = os.path.join(self.tmp.name, "c")
        scenes.write(SEED + 1, 20, other)
        c = read_dir(other)
        self.assertNotEqual(c["scenes.jsonl"], a["scenes.jsonl"])
        self.assertNotEqual(c["00000.png"], a["00000.png"])

    def test_answers_follow_from_objects(self):
        types = set()
        for r in self.lines:
            types.add(r["type"])
            self.check_answer(r)
        self.assertEqual(types, set(scenes.TYPES))

    def test_dense_questions(self):
        """train.py --dense: the count, colour and side of every shape with an answer, each
        following from the objects; the same scene (image, objects, sign) as the default."""
        more = 0
        for i in range(COUNT):
            sc, dense = scenes.scene(SEED, i), scenes.scene(SEED, i, dense=True)
            self.assertEqual(scenes.png_bytes(sc["image"]), scenes.png_bytes(dense["image"]))
            qs = [q for _, q, _ in dense["qa"]]
            self.assertEqual(len(qs), len(set(qs)), qs)
            self.assertTrue({q for _, q, _ in sc["qa"]} <= set(qs), (sc["qa"], qs))
            more += len(dense["qa"]) > len(sc["qa"])
            for r in scenes.records(dense, "x.png"):
                self.check_answer(r)
        self.assertGreater(more, COUNT // 4)

    def check_answer(self, r):
        plural = {v: k for k, v in scenes.PLURAL.items()}
        objs, sign, q, a, t = r["objects"], r["sign"], r["question"], r["answer"], r["type"]
        shapes = [o["shape"] for o in objs]
        self.assertTrue(1 <= len(objs) <= 6, r)
        for o in objs:
            self.assertIn(o["shape"], scenes.SHAPES)
            self.assertIn(o["colour"], scenes.COLOURS)
        if t == "shape":
            self.assertEqual(q, "What shape is this?")
            self.assertEqual(len(objs), 1, r)
            self.assertIsNone(sign, r)
            self.assertEqual(a, f"a {objs[0]['colour']} {objs[0]['shape']}")
        elif t == "count":
            s = plural[q.removeprefix("How many ").removesuffix(" are there?")]
            self.assertEqual(a, str(shapes.count(s)), r)
        elif t == "colour":
            s = q.removeprefix("What colour is the ").removesuffix("?")
            self.assertEqual(shapes.count(s), 1, r)
            self.assertEqual(a, objs[shapes.index(s)]["colour"])
        elif t == "side":
            s = q.removeprefix("Which side is the ").removesuffix(" on?")
            self.assertEqual(shapes.count(s), 1, r)
            self.assertGreater(r["width"], r["height"], r)
            box = objs[shapes.index(s)]["box"]
            cx = (box[0] + box[2]) / 2
            self.assertEqual(a, "left" if cx < 0.4 * r["width"] else "right" if cx > 0.6 * r["width"] else None, r)
        elif t == "sign":
            self.assertEqual(q, "What does the sign say?")
            self.assertIsNotNone(sign, r)
            self.assertEqual(a, sign["text"])
        elif t == "total":
            self.assertEqual(q, "How many shapes are there?")
            self.assertEqual(a, str(len(objs)))
        else:
            self.fail(f"unknown type {t}")
        self.assertEqual(r["text"], r["prompt"] + a + "<|im_end|>")
        self.assertEqual(r["prompt"], scenes.prompt_text(q))

    def test_drawn_as_recorded(self):
        seen = set()
        for r in self.lines:
            if r["image"] in seen:
                continue
            seen.add(r["image"])
            img = Image.open(os.path.join(self.dir, r["image"])).convert("RGB")
            self.assertEqual(img.size, (r["width"], r["height"]))
            boxes = [o["box"] for o in r["objects"]] + ([r["sign"]["box"]] if r["sign"] else [])
            for b in boxes:
                self.assertTrue(0 <= b[0] < b[2] <= r["width"] and 0 <= b[1] < b[3] <= r["height"], (r["image"], b))
            for i, a in enumerate(boxes):
                for b in boxes[i + 1:]:
                    self.assertFalse(scenes.overlaps(a, b, 0), (r["image"], a, b))
            for o in r["objects"]:
                b = o["box"]
                centre = ((b[0] + b[2]) // 2, (b[1] + b[3]) // 2)
                self.assertEqual(img.getpixel(centre), scenes.COLOURS[o["colour"]], (r["image"], o))

    def test_sizes_reach_the_extremes(self):
        sizes = {(r["width"], r["height"]) for r in self.lines}
        ratios = [max(w, h) / min(w, h) for w, h in sizes]
        self.assertLessEqual(max(ratios), 200)  # smart_resize refuses > 200
        self.assertIn(200, ratios)
        self.assertTrue(any(x >= 20 for x in ratios))
        self.assertTrue(any(w * h < 3136 for w, h in sizes))  # under min_pixels: scaled up
        self.assertTrue(any(w > h for w, h in sizes) and any(h > w for w, h in sizes))

    def test_frame_matches_the_plugin(self):
        cases = json.loads(read(os.path.join(ROOT, "plugins", "qwen2_5_vl", "testdata", "cases.json"), "r"))["cases"]
        checked = 0
        for c in cases:
            for fr in c.get("frames", []):
                want = fr["want"]
                if fr["text_first"] or not want["before"].startswith("<|im_start|>system\nYou are a helpful"):
                    continue
                span = want["span"]
                one = "".join(span["open"]) + span["pad"] + "".join(span["close"])
                self.assertEqual(scenes.prompt_text(fr["question"]), want["before"] + one + want["after"])
                self.assertEqual(span["pad"], "<|image_pad|>")
                self.assertIn(151645, want["stop_token_ids"])  # <|im_end|> ends the answer
                checked += 1
        self.assertGreater(checked, 0)

    def test_frame_matches_the_hub_template(self):
        try:
            import jinja2
        except ImportError:
            self.skipTest("no jinja2")
        path = os.path.join(ROOT, "core", "internal", "enginetest", "testdata", "qwen2_5_vl", "tiny-untied",
                            "chat_template.jinja")
        tmpl = jinja2.Environment().from_string(read(path, "r"))
        q, a = "What colour is the triangle?", "green"
        msgs = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": q}]}]
        self.assertEqual(tmpl.render(messages=msgs, add_generation_prompt=True), scenes.prompt_text(q))
        msgs.append({"role": "assistant", "content": a})
        # the template closes the assistant turn with <|im_end|> and a newline; generation stops at <|im_end|>
        self.assertEqual(tmpl.render(messages=msgs, add_generation_prompt=False), scenes.chat_text(q, a) + "\n")


if __name__ == "__main__":
    unittest.main(verbosity=2)
