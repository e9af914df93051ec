package httpapi

// adminRoutes are the OJS admin API's own routes (admin spec §5), under
// BasePath+AdminPath; the routes it shares with the rest of the API are
// adminAliased.
func (s *Server) adminRoutes() []route { return nil }
