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
