"""The machine this server runs on: its ``GpuCost`` settings, its detection at start-up,
the prices it brings (the catalog's, a cloud's price feed, AWS's spot price where asked
for) and the driver that stops it (budget_action ``stop-instance``).

* :mod:`.setup`: the machine's traits, its detection and prices, the stop driver;
* :mod:`.spot_prices`: opt-in, a detected AWS spot instance priced at its spot price;
* :mod:`.billed_rate`: a machine priced at the rate its reconciled bill showed;
* :mod:`.bounded`: the one bounded wait for a blocking call to an outside party.

May import: the server's base (:mod:`..traits`, ...), :mod:`..ledger` (the reconciled
bill), :mod:`..budget` (the stop's typed answer), ``jupyter_gpucost.cloud`` and ``.core``;
never :mod:`..spot`, the handlers, the service or the app.
"""
