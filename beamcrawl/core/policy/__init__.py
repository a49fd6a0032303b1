"""What a crawler may and should fetch: politeness arithmetic, robots.txt, usage preferences, domain budgets, change rates and revisit scheduling."""
