"""Invented news sites and the page templates they wrap every article in.

Scraped news keeps what the scraper failed to strip: CSS rules leaked as text, navigation bars,
share widgets, subscription prompts, editor lines, disclaimers and copyright footers, and a
"related articles" list whose headlines differ from page to page. Each site here has its own
such blocks, so two unrelated articles of one site share a few hundred characters of template
text; that is what `consumer.evaluation.templates` puts into an evaluation feed.

Every name, address and number below is invented (addresses use the reserved `.example`
domain). The Chinese sites are written in Simplified script; a Traditional-script feed gets
them converted. Placeholders, filled per article: ${date} (2022-03-04), ${date_zh}
(2022年3月4日), ${date_en} (March 4, 2022), ${time} (09:30), ${editor} (one of the site's
editors) and ${related} (headlines of other recent articles, one per line).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from random import Random
from string import Template

_MONTHS_EN = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Page:
    """The template around one article: `head` goes above its content, `tail` below."""

    head: str
    tail: str

    def wrap(self, content: str) -> str:
        parts = [self.head, content, self.tail]
        return "\n".join(p for p in parts if p)


@dataclass(frozen=True, slots=True)
class Site:
    key: str  # a stable ASCII name, the same in either Chinese script
    head: str  # string.Template text; "" for none
    tail: str
    editors: tuple[str, ...] = ()
    related: int = 0  # headlines in its related-articles list
    bullet: str = "· "  # what precedes each related headline

    def render(self, rng: Random, published_at: datetime, recent_titles: Sequence[str]) -> Page:
        """This site's template for an article published at `published_at`; the related list
        is drawn from `recent_titles` (other articles' headlines)."""
        count = min(self.related, len(recent_titles))
        related = "\n".join(self.bullet + t for t in rng.sample(list(recent_titles), count))
        values = {
            "date": published_at.strftime("%Y-%m-%d"),
            "date_zh": f"{published_at.year}年{published_at.month}月{published_at.day}日",
            "date_en": (
                f"{_MONTHS_EN[published_at.month - 1]} {published_at.day}, {published_at.year}"
            ),
            "time": published_at.strftime("%H:%M"),
            "editor": rng.choice(self.editors) if self.editors else "",
            "related": related,
        }
        return Page(
            Template(self.head).safe_substitute(values).strip(),
            Template(self.tail).safe_substitute(values).strip(),
        )


# --- Chinese sites ----------------------------------------------------------------------------

# Its stylesheet leaked into the text above every article: Latin-heavy, ~750 characters.
_CHENLAN = Site(
    key="chenlan",
    head=(
        ".hd-wrap{width:1200px;margin:0 auto;height:64px;line-height:64px;}"
        ".hd-wrap .logo{float:left;width:180px;height:48px;margin-top:8px;"
        "background:url(//static.chenlan.example/img/logo_v3.png) no-repeat 0 0;}"
        ".nav-main li{float:left;padding:0 18px;font-size:16px;color:#333;}"
        ".nav-main li.on a{color:#c00;border-bottom:2px solid #c00;}"
        ".article-box{padding:24px 30px 0;background:#fff;}"
        ".article-box h1{font-size:28px;line-height:40px;font-weight:700;color:#222;}"
        ".article-info{margin:12px 0 20px;color:#999;font-size:13px;}"
        ".article-info span{margin-right:16px;}"
        ".share-bar a{display:inline-block;width:28px;height:28px;"
        "background:url(//static.chenlan.example/img/share_sprite.png) no-repeat;}"
        ".share-bar .wx{background-position:0 0;}.share-bar .wb{background-position:-30px 0;}\n"
        "晨岚新闻网 ${date} ${time}"
    ),
    tail="（责任编辑：${editor}）\n晨岚新闻网版权所有，未经书面授权不得转载。",
    editors=("周海宁", "林若溪", "郭振东"),
)

# A financial site whose layout CSS leaked too, with a different stylesheet and a footer. Its
# sheet is minified as a build tool leaves one: a licence comment, an old browser's clearfix
# hack, an animation's keyframes and an icon inlined as a data URI.
_BEIAN = Site(
    key="beian",
    head=(
        "/*! beian-caijing layout v4.2.1 | (c) 2012-2024 */"
        'body{font-family:"Helvetica Neue",Arial,"PingFang SC","Microsoft YaHei",sans-serif;}'
        '.clearfix{*zoom:1;}.clearfix:after{content:"";display:table;clear:both;}'
        "@keyframes ad-fade{from{opacity:0}to{opacity:1}}"
        ".ico-hot{display:inline-block;width:16px;height:16px;background:url(data:image/png;"
        "base64,iVBORw0KGgoAAAANSUhEUgAAABAAAAAQCAYAAAAf8/9hpU3KGCUwux1tEyze1iN7LtkeP3IfyxlxF0SU"
        "1kk8nVw0YL4xIB5p/tqg7ui5mX9cfCmZ/a/lkyU81lSvTfrXFCegrrP+6SMvivIhH57kkcWxC+y1Vjv8"
        "Hm+TQn7LyP4pVeXNjkbcjtS3wnZNKlpNdncG+F2GkAJK1r2jQBvpyMvMyTX2zR9hImrhUziuGjQATTO6"
        "DSRqwEyBsbryPjv57vX3nytJNK+H9VILablLDZguhbtVtnKocmN6zXRm/LYODo/xhGOw5LK6KXA0dPBk"
        "rGj3APWwKz3GZvRb3qosyu3NK1FX) no-repeat;}"
        ".topbar{height:32px;background:#1f2d3d;color:#c0c4cc;font-size:12px;}"
        ".topbar a:hover{color:#fff;text-decoration:underline;}"
        ".main-col{float:left;width:760px;padding-right:40px;}.side-col{float:right;width:300px;}"
        ".txt-content p{text-indent:2em;margin-bottom:18px;font-size:17px;line-height:30px;}"
        ".txt-content img{display:block;max-width:640px;margin:10px auto;}"
        ".ad-slot-r1{width:300px;height:250px;overflow:hidden;"
        "background:#f7f7f7 url(//cdn.beian-caijing.example/ad/holder.gif) center no-repeat;}"
        ".footer-links{clear:both;padding:20px 0;border-top:1px solid #e5e5e5;text-align:center;}"
    ),
    tail=(
        "北岸财经 ${date_zh}\n"
        "风险提示：本文内容仅供参考，不构成任何投资建议。市场有风险，投资需谨慎。\n"
        "作者：${editor}\n"
        "© 2012-2024 北岸财经 版权所有"
    ),
    editors=("邵一鸣", "冯佳慧", "钱立"),
)

# Navigation, a share widget, a subscription prompt and a list of related articles.
_JIANGPAN = Site(
    key="jiangpan",
    head=(
        "首页 | 要闻 | 时政 | 财经 | 社会 | 国际 | 体育 | 文娱 | 视频 | 专题\n"
        "江畔日报客户端 ${date} ${time}  字号：大 中 小\n"
        "分享到：微信 朋友圈 微博 QQ空间 复制链接"
    ),
    tail=(
        "打开江畔日报客户端，阅读更多深度报道。\n"
        "订阅每日早报，第一时间获取要闻推送 >>\n"
        "相关阅读：\n${related}\n"
        "本稿件所含文字、图片和音视频资料，版权均属江畔日报所有，任何媒体、网站或个人未经"
        "授权不得转载，违者将依法追究责任。"
    ),
    editors=("唐晓辉", "许文静"),
    related=5,
)

# No header; a long disclaimer, an editor line and related articles at the bottom.
_YUNYUE = Site(
    key="yunyue",
    head="",
    tail=(
        "【免责声明】本文来自网络转载，仅代表原作者观点，与云阅资讯无关。云阅资讯对文中陈述、"
        "观点判断保持中立，不对所包含内容的准确性、可靠性或完整性提供任何明示或暗示的保证。"
        "请读者仅作参考，并请自行承担全部责任。如涉及作品内容、版权等问题，请在三十日内与"
        "本网联系，我们将在第一时间删除。\n"
        "责任编辑：${editor}\n"
        "猜你喜欢\n${related}"
    ),
    editors=("韩雪梅", "吕志强", "蔡明", "孔令伟"),
    related=6,
    bullet="▪ ",
)

# A breadcrumb and a byline above, a follow-us prompt and a licence footer below.
_DONGLI = Site(
    key="dongli",
    head=(
        "您当前的位置：首页 > 新闻中心 > 正文\n"
        "发布时间：${date} ${time}　来源：东篱传媒　作者：${editor}"
    ),
    tail=(
        "扫描二维码关注东篱传媒官方公众号，获取更多本地资讯。\n"
        "本网刊载的原创作品，版权归东篱传媒所有；转载请注明出处，并保留原文链接。\n"
        "上一篇 下一篇 返回顶部\n"
        "关于我们 | 联系我们 | 广告服务 | 网站地图 | 隐私政策\n"
        "Copyright © 2009-2024 东篱传媒 版权所有 违法和不良信息举报电话：000-0000-0000"
    ),
    editors=("杨帆", "何静怡", "罗建华"),
)

CHINESE_SITES: tuple[Site, ...] = (_CHENLAN, _BEIAN, _JIANGPAN, _YUNYUE, _DONGLI)


# --- English sites ----------------------------------------------------------------------------

# A navigation bar and share buttons above, related coverage and a copyright line below.
_HARBOR = Site(
    key="harbor-ledger",
    head=(
        "Home | World | Business | Markets | Technology | Opinion | Sign in\n"
        "THE HARBOR LEDGER\n"
        "Share this article: Facebook Twitter LinkedIn Email Print"
    ),
    tail=(
        "Related coverage\n${related}\n"
        "Copyright 2024 The Harbor Ledger Company. All rights reserved. "
        "Terms of Use | Privacy Policy | Cookie Settings"
    ),
    related=4,
    bullet="- ",
)

# A dateline above; a newsletter prompt and a long disclaimer below.
_MIDLAND = Site(
    key="midland-wire",
    head="Midland Wire Review | Updated ${date_en} ${time} GMT | By ${editor}",
    tail=(
        "Sign up for the Midland Morning Briefing: the stories that move markets, in your inbox "
        "before the opening bell. Subscribe now.\n"
        "Disclaimer: Midland Wire Review republishes material from third-party wire services. "
        "The views expressed are those of the original authors and do not constitute investment "
        "advice. Midland Wire Review accepts no liability for any loss arising from reliance on "
        "this content."
    ),
    editors=("Daniel Reeve", "Priya Natarajan", "Tom Whitcombe", "Lena Brandt"),
)

# Leaked stylesheet above, an editing line, more-from links and a footer below.
_QUAYSIDE = Site(
    key="quayside-post",
    head=(
        ".qp-header{height:72px;border-bottom:3px solid #0b3d6b;}"
        ".qp-header .masthead{font-family:Georgia,serif;font-size:34px;letter-spacing:1px;}"
        ".qp-story p{margin:0 0 16px;font-size:18px;line-height:1.6;}"
        ".qp-story .byline{color:#6b6b6b;font-size:13px;text-transform:uppercase;}"
    ),
    tail=(
        "(Editing by ${editor})\n"
        "More from the Quayside Post\n${related}\n"
        "(c) 2024 Quayside Media Group. Contact us | Advertise | Careers | Accessibility"
    ),
    editors=("Graham Oduya", "Hannah Velez", "Sean Murtagh"),
    related=3,
    bullet="> ",
)

ENGLISH_SITES: tuple[Site, ...] = (_HARBOR, _MIDLAND, _QUAYSIDE)
