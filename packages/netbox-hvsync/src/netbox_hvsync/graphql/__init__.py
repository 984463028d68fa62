"""GraphQL types, filters and queries of the plugin's models (NetBox's `/graphql/`)."""
