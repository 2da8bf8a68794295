"""Web tools, each against its real HTTP API: Tavily, Wikipedia, DuckDuckGo, Google (SerpApi), Bing, Yahoo Finance."""
