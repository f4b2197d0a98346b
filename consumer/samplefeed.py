"""A synthetic news feed for the demo and the compose stack: stories, reposts and look-alikes.

Every sentence is assembled from the templates below, so the project ships no real news.
Each story appears once as an original; some are reposted verbatim by other outlets, some
re-edited (boilerplate, a dropped sentence, punctuation, a new headline, Traditional script),
and a few invalid messages show the dead-letter topic at work.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

_ZH_CITIES = [
    "北京",
    "上海",
    "广州",
    "深圳",
    "杭州",
    "成都",
    "武汉",
    "西安",
    "南京",
    "重庆",
    "天津",
    "苏州",
    "长沙",
    "郑州",
    "青岛",
    "厦门",
    "昆明",
    "大连",
    "沈阳",
    "合肥",
]
_ZH_ORGS = [
    "市交通委员会",
    "省教育厅",
    "气象台",
    "科技园管委会",
    "卫生健康委员会",
    "文化旅游局",
    "市场监督管理局",
    "生态环境局",
    "住房和城乡建设局",
    "农业农村局",
    "体育局",
    "商务局",
]
_ZH_TOPICS = [
    "地铁新线路",
    "中小学课后服务",
    "暴雨预警",
    "人工智能产业园",
    "流感疫苗接种",
    "博物馆夜场",
    "食品安全抽检",
    "空气质量改善",
    "老旧小区改造",
    "秋粮收购",
    "马拉松赛事",
    "跨境电商试点",
    "新能源汽车充电桩",
    "社区养老服务",
    "古城保护规划",
]
_ZH_SENTENCES = [
    "{city}{org}{day}发布消息，{topic}相关工作将于本月{n1}日正式启动。",
    "据介绍，此次{topic}共涉及{n2}个项目，总投资约{n3}亿元。",
    "{org}负责人表示，将进一步完善配套措施，确保{topic}顺利推进。",
    "记者从{city}了解到，已有{n4}家单位报名参与{topic}。",
    "专家认为，{topic}有助于提升城市治理水平，预计惠及{n5}万居民。",
    "为保障工作有序开展，{city}还将设立{n1}个服务点，提供现场咨询。",
    "今年以来，{city}在{topic}方面累计完成投资{n3}亿元，同比增长{n6}%。",
    "市民可通过官方网站或热线电话查询{topic}的具体安排。",
    "下一步，{org}将会同有关部门开展专项检查，发现问题及时整改。",
    "{day}上午，{city}召开专题会议，研究部署{topic}有关事项。",
    "会议要求，各区要压实责任，在{n1}月底前完成阶段性任务。",
    "据统计，截至目前已受理相关申请{n4}件，办结率达到{n6}%。",
]
_ZH_DAYS = ["周一", "周二", "周三", "周四", "周五", "昨日", "今日"]
_ZH_BOILER = [
    "（来源：{outlet}  编辑：{editor}）",
    "本文转载自{outlet}，版权归原作者所有。",
    "责任编辑：{editor}",
    "【{outlet}讯】",
]
_ZH_OUTLETS = ["晨报", "都市快讯", "新闻网", "日报客户端", "财经频道"]
_ZH_EDITORS = ["王晓", "李敏", "张强", "陈静", "刘洋"]

_EN_CITIES = [
    "Springfield",
    "Riverton",
    "Lakeside",
    "Fairview",
    "Brookfield",
    "Maple Falls",
    "Clearwater",
    "Oakridge",
    "Harborview",
    "Pinehurst",
    "Eastport",
    "Westbury",
]
_EN_ORGS = [
    "the city council",
    "the transit authority",
    "the school board",
    "the port authority",
    "the health department",
    "the water utility",
    "the chamber of commerce",
]
_EN_TOPICS = [
    "a new light rail line",
    "a downtown housing plan",
    "the flood defence upgrade",
    "a regional vaccination drive",
    "the harbour expansion",
    "a solar farm project",
    "the public library renovation",
    "a bridge repair programme",
    "a youth jobs scheme",
]
_EN_SENTENCES = [
    "{city} — {org} on {day} approved {topic}, with work due to begin within {n1} weeks.",
    "The plan covers {n2} sites and is expected to cost about {n3} million dollars.",
    "Officials said {topic} would serve roughly {n5} thousand residents once complete.",
    "A spokesperson for {org} said contractors had been selected after a public tender.",
    "Critics argued that {topic} had been rushed, citing {n4} unresolved objections.",
    "Supporters said the project would create {n2} permanent jobs in {city}.",
    "Funding will come from a mix of state grants and municipal bonds, {org} said.",
    "A public hearing on {topic} is scheduled for the {n1}th of next month.",
    "Residents can read the full proposal on the website of {org}.",
    "Last year {city} spent {n3} million dollars on similar schemes, up {n6} percent.",
]
_EN_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]
_EN_BOILER = [
    "(Reporting by {editor}; editing by {outlet} staff)",
    "Copyright {outlet}. All rights reserved.",
    "This story was first published by {outlet}.",
]
_EN_OUTLETS = ["Daily Ledger", "Metro Wire", "Evening Post", "Coast News"]
_EN_EDITORS = ["J. Smith", "A. Patel", "M. Garcia", "L. Chen"]


@dataclass(frozen=True, slots=True)
class _Story:
    key: str
    lang: str
    title: str
    sentences: tuple[str, ...]


def _story(rng: random.Random, key: str) -> _Story:
    lang = "zh" if rng.random() < 0.7 else "en"
    if lang == "zh":
        cities, orgs, topics, sentences, days = (
            _ZH_CITIES,
            _ZH_ORGS,
            _ZH_TOPICS,
            _ZH_SENTENCES,
            _ZH_DAYS,
        )
    else:
        cities, orgs, topics, sentences, days = (
            _EN_CITIES,
            _EN_ORGS,
            _EN_TOPICS,
            _EN_SENTENCES,
            _EN_DAYS,
        )
    slots = {
        "city": rng.choice(cities),
        "org": rng.choice(orgs),
        "topic": rng.choice(topics),
        "day": rng.choice(days),
        "n1": str(rng.randint(2, 28)),
        "n2": str(rng.randint(3, 90)),
        "n3": str(rng.randint(2, 400)),
        "n4": str(rng.randint(10, 900)),
        "n5": str(rng.randint(5, 300)),
        "n6": str(rng.randint(2, 60)),
    }
    chosen = rng.sample(sentences, k=min(len(sentences), rng.randint(6, 9)))
    body = tuple(t.format(**slots) for t in chosen)
    if lang == "zh":
        title = f"{slots['city']}{slots['org']}部署{slots['topic']}"
    else:
        title = f"{slots['city']}: {slots['org']} backs {slots['topic']}".capitalize()
    return _Story(key, lang, title, body)


def _edited(story: _Story, rng: random.Random) -> tuple[str, str, str]:
    """A re-edited copy: what an aggregator sees when another outlet rewrites the wire story."""
    sentences = list(story.sentences)
    kind = rng.choice(["boilerplate", "drop_sentence", "punctuation", "new_title", "traditional"])
    title = story.title
    if kind == "boilerplate":
        outlets, editors, lines = (
            (_ZH_OUTLETS, _ZH_EDITORS, _ZH_BOILER)
            if story.lang == "zh"
            else (_EN_OUTLETS, _EN_EDITORS, _EN_BOILER)
        )
        sentences.append(
            rng.choice(lines).format(outlet=rng.choice(outlets), editor=rng.choice(editors))
        )
    elif kind == "drop_sentence":
        del sentences[rng.randrange(len(sentences))]
    elif kind == "punctuation":
        sentences = [s.replace("，", ", ").replace("。", ". ") for s in sentences]
    elif kind == "new_title":
        title = ("【独家】" if story.lang == "zh" else "UPDATE 1-") + title
    elif kind == "traditional" and story.lang == "zh":
        import opencc

        converter = opencc.OpenCC("s2t")
        title = converter.convert(title)
        sentences = [converter.convert(s) for s in sentences]
    return kind, title, _layout(sentences, rng)


def _layout(sentences: list[str], rng: random.Random) -> str:
    if rng.random() < 0.3:  # some outlets ship HTML
        return "".join(f"<p>{s}</p>" for s in sentences)
    return "\n".join(sentences)


def generate_feed(
    stories: int = 300, seed: int = 7, start: datetime | None = None
) -> Iterator[dict]:
    """Yield feed messages (dicts) in publish order. Roughly: every story once, 25 % reposted
    verbatim, 35 % re-edited, plus two invalid messages."""
    rng = random.Random(seed)
    clock = start or datetime(2026, 11, 22, 0, 0, tzinfo=UTC)
    messages: list[tuple[datetime, dict]] = []
    for n in range(stories):
        # The seed is part of every id: another seed's feed is other articles, not updates.
        story = _story(rng, f"{seed}s{n}")
        published = clock + timedelta(seconds=rng.randint(0, 36 * 3600))
        outlet = "wire"
        messages.append(
            (
                published,
                {
                    "id": f"{outlet}-{story.key}",
                    "title": story.title,
                    "content": _layout(list(story.sentences), rng),
                    "source": outlet,
                    "lang": story.lang,
                    "published_at": published.isoformat(),
                },
            )
        )
        for copy in range(rng.choice([0, 0, 0, 1, 1, 2, 3])):
            later = published + timedelta(minutes=rng.randint(1, 600))
            if rng.random() < 0.4:
                content, title, kind = "\n".join(story.sentences), story.title, "repost"
            else:
                kind, title, content = _edited(story, rng)
            messages.append(
                (
                    later,
                    {
                        "id": f"{kind}{copy}-{story.key}",
                        "title": title,
                        "content": content,
                        "source": f"outlet{copy}",
                        "lang": story.lang,
                        "published_at": later.isoformat(),
                    },
                )
            )
    messages.sort(key=lambda m: m[0])
    invalid_at = {
        len(messages) // 3: {"title": "an article without an id"},
        2 * len(messages) // 3: {"id": f"empty-{seed}", "title": "", "content": "  "},
    }
    for i, (_, message) in enumerate(messages):
        if i in invalid_at:
            yield invalid_at[i]
        yield message


def write_feed(path: str, stories: int = 300, seed: int = 7) -> int:
    count = 0
    with open(path, "w", encoding="utf-8") as f:
        for message in generate_feed(stories, seed):
            f.write(json.dumps(message, ensure_ascii=False) + "\n")
            count += 1
    return count
