"""The network (the protocol layer): the asyncio fetcher, bounded transfers, conditional requests, the address gate and policy, DNS, signed requests."""
