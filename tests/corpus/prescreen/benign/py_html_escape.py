# label: benign
import html
comment = "<script>alert('x')</script> & friends"
print(html.escape(comment))
