"""Python functions for bid_fees.flow (its CREATE FUNCTION statements name them).

flowc reads this file to check that the functions exist, and `flowc run` imports it; every
value they return is checked against the type the .flow file declares.
"""

from decimal import ROUND_HALF_UP, Decimal


def price_band(price):
    """The band of a bid's price, in cents: NULL stays NULL."""
    if price is None:
        return None
    if price >= 5000:
        return "premium"
    if price >= 2000:
        return "standard"
    return "budget"


def fee(price):
    """The house's fee: 2.5% of the price, at least 25 cents, in cents to two places."""
    if price is None:
        return None
    return max(Decimal(price) * Decimal("0.025"), Decimal(25)).quantize(
        Decimal("0.01"), rounding=ROUND_HALF_UP
    )
