class Inventory:
    def __init__(self):
        self.items = {}

    def add_item(self, name, quantity, price):
        if quantity < 0:
            raise ValueError("quantity must not be negative")
        if name in self.items:
            self.items[name]["quantity"] += quantity
        else:
            self.items[name] = {"quantity": quantity, "price": price}

    def remove_item(self, name, quantity):
        if name not in self.items:
            raise KeyError(name)
        if self.items[name]["quantity"] < quantity:
            raise ValueError("not enough items in stock")
        self.items[name]["quantity"] -= quantity

    def total_value(self):
        total = 0
        for name in self.items:
            total += self.items[name]["quantity"] * self.items[name]["price"]
        return total

    def report(self):
        lines = []
        for name in sorted(self.items):
            item = self.items[name]
            lines.append(f"{name}: {item['quantity']} at {item['price']:.2f}")
        return "\n".join(lines)
