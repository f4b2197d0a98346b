"""A block of a site's CSS as scrapers leave it in front of each story (about 700 characters),
for tests of what a shared page template must not do to decisions."""

LEAKED_CSS = (
    ".art-hd{padding:20px 20px 0px;background:url(//img.portal.example/res/hd_bg.png) no-repeat"
    " 0 0 #f4f4f4;}.art-hd h1{font-size:26px;line-height:36px;color:#222;font-weight:bold;"
    "margin:0 0 12px;}.art-info{height:28px;line-height:28px;color:#999;font-size:12px;"
    "border-bottom:1px solid #e5e5e5;}.art-info .src a{color:#406599;text-decoration:none;"
    "margin-left:8px;}.share-bar{float:right;width:240px;height:24px;overflow:hidden;}"
    ".share-bar a{display:inline-block;width:24px;height:24px;margin-left:6px;"
    "background:url(//img.portal.example/res/share.png) no-repeat;}.art-body p{text-indent:2em;"
    "font-size:16px;line-height:30px;margin-bottom:18px;color:#333;}.art-body img{max-width:"
    "600px;display:block;margin:10px auto;}"
)

# A Chinese portal's page furniture after its stories (about 650 characters): a disclaimer,
# copyright terms, a subscription prompt, related headlines, the editor's line, the licence.
PORTAL_FOOTER = (
    "【免责声明】本网站所刊载的文章仅代表作者个人观点，不代表本网立场，亦不构成任何投资建议。"
    "凡本网注明“来源：本网”的所有作品，版权均属于本网，未经书面授权不得转载、摘编或以其他方式使用。"
    "已经本网授权使用作品的，应在授权范围内使用，并注明“来源：本网”。违反上述声明者，本网将追究其相关"
    "法律责任。扫描二维码关注我们的微信公众号，每天为您推送最新最热的新闻资讯，精彩内容不容错过。"
    "下载客户端，随时随地看新闻。相关阅读：全市中小学今日起陆续开学 交通部门提醒家长错峰出行；"
    "气象台发布暴雨黄色预警 多区停课；本地楼市成交量连续三周回升 业内人士称仍需观望；"
    "夜间经济带动消费 商圈客流同比增长两成；热门推荐：专家解读最新政策对市民生活的影响；"
    "十张图看懂今年上半年经济数据；地铁新线路下月开通 沿线居民出行时间缩短一半；"
    "秋季流感疫苗接种今日启动 社区卫生服务中心延长开放时间；本市新增三座城市公园 "
    "市民可免费入园；老旧小区改造进入收尾阶段 加装电梯惠及上万户居民；图片新闻："
    "晚霞映红城市天际线；视频：一分钟看本周要闻；网友热议：外卖骑手该不该限速；"
    "今日天气：多云转晴 气温十八至二十六度 空气质量良；更多精彩内容请访问本网首页。"
    "责任编辑：李明 本网编辑部 联系电话：010-12345678 "
    "违法和不良信息举报邮箱：report@example.cn 网站备案号：京ICP备12345678号 "
    "Copyright © 2008-2024 本网 All Rights Reserved 版权所有 复制必究"
)

# The inline scripts of a portal's article page, kept as text by a scraper that dropped the
# tags but not their bodies (about 900 characters): a statistics loader, a share widget's
# settings and the page's structured data.
LEAKED_SCRIPT = (
    "var _stq = _stq || []; _stq.push(['_setAccount', 'pt-20931']); (function() { var s = "
    "document.createElement('script'); s.async = true; s.src = '//stat.portal.example/s.js?v="
    "3.1.8'; var f = document.getElementsByTagName('script')[0]; f.parentNode.insertBefore(s, "
    'f); })(); window.shareConfig = {"common": {"text": "", "desc": "", "pic": "", '
    '"size": "24", "style": "1"}, "share": [{"tag": "bar", "count": 6}], '
    '"image": {"viewList": ["weixin", "weibo", "qzone"], "size": "16"}}; (function'
    "(d) { var e = d.createElement('script'); e.src = '//share.portal.example/api/share.js?t=' + "
    "Math.floor(new Date().getTime() / 3600000); (d.head || d.body).appendChild(e); })(document);"
    '\n{"@context": "https://schema.org", "@type": "NewsArticle", "publisher": {"@type"'
    ': "Organization", "name": "Portal News", "logo": {"@type": "ImageObject", "url": '
    '"https://img.portal.example/logo_600x60.png"}}, "isAccessibleForFree": true}\n'
    "if (window.innerWidth < 768) { document.body.className += ' m-layout'; } var pageInfo = "
    "{channel: 'news', sub: 'society', tpl: 'article_v4', ad: [1031, 1032, 1045]};"
)

# A portal's furniture in English under its Chinese stories (about 600 characters, 480 Latin
# letters): more Latin letters than a brief of 400 Chinese characters has letters.
ENGLISH_FOOTER = (
    "Home | News | World | Business | Markets | Tech | Sports | Culture | Opinion | Video | "
    "Photos | Follow us on Facebook, Twitter and Instagram. Download our app for iOS and "
    "Android. Subscribe to the Morning Brief newsletter for the top stories delivered to your "
    "inbox every day. About Us | Contact Us | Advertise With Us | Careers | Terms of Use | "
    "Privacy Policy | Cookie Settings | Accessibility | Site Map. Copyright (c) 2008-2024 "
    "Portal Media Group Limited. All rights reserved. No part of this site may be reproduced "
    "without written permission. Reporting by our correspondents; editing by the news desk."
)


def _base64_blob(chars: int, seed: int) -> str:
    """`chars` characters of base64, as an image or a widget's state is encoded in a page and
    left as text where a scraper dropped the attribute that held it."""
    import random

    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    rng = random.Random(seed)
    return "".join(rng.choice(alphabet) for _ in range(chars)) + "=="


# A 400-character blob of base64 that a site's pages carry above their footer.
BASE64_BLOB = _base64_blob(400, seed=31)
