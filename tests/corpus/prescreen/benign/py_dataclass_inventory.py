# label: benign
from dataclasses import dataclass, field

@dataclass
class Item:
    name: str
    price: float
    tags: list = field(default_factory=list)

items = [Item("pen", 1.5), Item("book", 12.0, ["paper"])]
print(sorted(items, key=lambda i: i.price, reverse=True)[0].name)
