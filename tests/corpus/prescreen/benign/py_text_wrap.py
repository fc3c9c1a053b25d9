# label: benign
import textwrap
para = "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua."
print(textwrap.fill(para, width=40))
print(para.title()[:30])
