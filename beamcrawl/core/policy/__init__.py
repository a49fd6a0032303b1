"""What a crawler may and should fetch: politeness arithmetic, robots.txt, domain budgets, change rates and revisit scheduling."""
